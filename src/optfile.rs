//! Reading the files options name: API keys and passwords, pattern files, the web config and
//! the certificates, keys and CA bundles it and `--push.ca-file` / `top --url.ca-file` name.
//!
//! One bounded reader for all of them ([`read`]): a regular file only (a symlink to one is
//! followed, as Kubernetes mounts secrets), opened without blocking (a FIFO would hold start-up
//! for ever) and read up to its kind's limit ([`Kind::limit`]), so a mistyped path naming a
//! device (`/dev/zero` grew the process to 2.1 GB, and the PEM parser aborted it on a 4 GiB
//! allocation), a FIFO or a huge file is refused at once with a message, never read. The state
//! file (`src/state/persist.rs`) is read by the same reader under its own [`Rules`] (its own
//! limit, and a symlink is never followed: the exporter writes that file itself).

use std::io::Read;
use std::path::Path;

/// What a file holds, which bounds its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An API key or a password: 8 KiB.
    Secret,
    /// A pattern file or the web config (YAML): 4 MiB.
    Config,
    /// PEM certificates, keys and CA bundles: 4 MiB (a system CA bundle is ~200 KB).
    Pem,
}

impl Kind {
    /// The most bytes a file of this kind may hold.
    pub fn limit(self) -> u64 {
        match self {
            Kind::Secret => 8 << 10,
            Kind::Config | Kind::Pem => 4 << 20,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Secret => "a key or password file",
            Kind::Config => "a configuration file",
            Kind::Pem => "a certificate or key file",
        }
    }

    /// How a file of this kind is read: its limit, symlinks followed.
    pub fn rules(self) -> Rules {
        Rules {
            limit: self.limit(),
            what: self.what(),
            follow_links: true,
        }
    }
}

/// How [`read_as`] reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The most bytes the file may hold.
    pub limit: u64,
    /// What the file is, in messages ("a state file").
    pub what: &'static str,
    /// Whether a symlink is followed; if not, a link is refused (`O_NOFOLLOW`), never read.
    pub follow_links: bool,
}

/// What a file that is not a regular file is, in words.
fn file_type(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads the file at `path`, a regular file of at most `kind`'s limit.
///
/// # Errors
/// The open or read error, or one of kind `InvalidInput` for a file that is not a regular file
/// ("a FIFO, not read: not a regular file …") or is larger than the limit. The message does not name the path:
/// callers name the option and the path.
pub fn read(path: &Path, kind: Kind) -> std::io::Result<Vec<u8>> {
    read_as(path, &kind.rules())
}

/// Reads the file at `path`, a regular file of at most `rules.limit` bytes, a symlink followed
/// only where `rules` says so.
///
/// # Errors
/// As [`read`]; a symlink not followed is one of kind `InvalidInput` ("a symlink, not followed,
/// not read: …").
pub fn read_as(path: &Path, rules: &Rules) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer; on a regular file it
    // changes nothing.
    let nofollow = if rules.follow_links {
        0
    } else {
        libc::O_NOFOLLOW
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | nofollow)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if !rules.follow_links => invalid(format!(
                "a symlink, not followed, not read: {} must be a regular file",
                rules.what
            )),
            _ => e,
        })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(invalid(format!(
            "{}, not read: not a regular file ({} must be one)",
            file_type(&m),
            rules.what
        )));
    }
    let limit = rules.limit;
    let too_big = |n: u64| {
        invalid(format!(
            "{n} bytes or more, more than {} may hold ({limit} bytes), not read",
            rules.what
        ))
    };
    if m.len() > limit {
        return Err(too_big(m.len()));
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    // The file may grow between the check and the read.
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
///
/// # Errors
/// As [`read`], and one of kind `InvalidData` for text that is not UTF-8.
pub fn read_text(path: &Path, kind: Kind) -> std::io::Result<String> {
    read_text_as(path, &kind.rules())
}

/// [`read_as`] as UTF-8 text.
///
/// # Errors
/// As [`read_text`].
pub fn read_text_as(path: &Path, rules: &Rules) -> std::io::Result<String> {
    String::from_utf8(read_as(path, rules)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("key");
        std::fs::write(&ok, "sk-1\n").unwrap();
        assert_eq!(read_text(&ok, Kind::Secret).unwrap(), "sk-1\n");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&ok, &link).unwrap();
        assert_eq!(read(&link, Kind::Secret).unwrap(), b"sk-1\n");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'k'; 8193]).unwrap();
        assert_eq!(
            read(&big, Kind::Secret).unwrap_err().to_string(),
            "8193 bytes or more, more than a key or password file may hold (8192 bytes), not read"
        );
        assert_eq!(read(&big, Kind::Config).unwrap().len(), 8193);
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read(&fifo, Kind::Config).unwrap_err().to_string(),
            "a FIFO, not read: not a regular file (a configuration file must be one)"
        );
        assert_eq!(
            read(Path::new("/dev/zero"), Kind::Pem)
                .unwrap_err()
                .to_string(),
            "a character device, not read: not a regular file (a certificate or key file must be one)"
        );
        assert!(read(dir.path(), Kind::Pem)
            .unwrap_err()
            .to_string()
            .starts_with("a directory, not read: not a regular file"));
        // Under rules that follow no link: the link is refused, the file itself read.
        let own = Rules {
            limit: 5,
            what: "a state file",
            follow_links: false,
        };
        assert_eq!(read_text_as(&ok, &own).unwrap(), "sk-1\n");
        let e = read_as(&link, &own).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "a symlink, not followed, not read: a state file must be a regular file"
        );
        std::fs::write(&ok, "sk-12\n").unwrap();
        assert_eq!(
            read_as(&ok, &own).unwrap_err().to_string(),
            "6 bytes or more, more than a state file may hold (5 bytes), not read"
        );
        let gone = dir.path().join("gone");
        assert_eq!(
            read_as(&gone, &own).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::fs::write(&ok, b"\xff\n").unwrap();
        assert_eq!(
            read_text(&ok, Kind::Secret).unwrap_err().kind(),
            std::io::ErrorKind::InvalidData
        );
    }
}
