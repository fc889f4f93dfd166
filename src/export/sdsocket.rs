//! `--web.systemd-socket`: serve on the listening sockets systemd passes (socket activation,
//! `sd_listen_fds(3)`: descriptors from 3 on, `LISTEN_FDS` of them, for the process
//! `LISTEN_PID` names), as Prometheus's exporter-toolkit does; `--web.listen-address` is then
//! ignored. `systemd/sglang-log-exporter.socket` is an example unit.

use std::os::fd::{FromRawFd, RawFd};

/// The TCP listeners systemd passed, non-blocking and close-on-exec (a journalctl child never
/// holds one).
///
/// # Errors
/// A message when none was passed to this process (`LISTEN_PID` is another's or unset), the
/// variables are malformed, or a descriptor is not a listening TCP socket (a `.socket` unit
/// with `ListenDatagram=`, a Unix socket): serving something else would be a silent outage.
pub fn listeners() -> Result<Vec<std::net::TcpListener>, String> {
    let fds: Vec<RawFd> = sd_notify::listen_fds()
        .map_err(|e| format!("--web.systemd-socket: the sockets systemd passed are unusable: {e}"))?
        .collect();
    if fds.is_empty() {
        return Err("--web.systemd-socket: systemd passed no socket (LISTEN_FDS/LISTEN_PID unset or for another process: start the exporter from its .socket unit, see systemd/sglang-log-exporter.socket)".into());
    }
    fds.into_iter().map(listener).collect()
}

fn int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`.
    let r = unsafe { libc::getsockopt(fd, level, name, (&raw mut v).cast(), &mut len) };
    (r == 0).then_some(v)
}

fn listener(fd: RawFd) -> Result<std::net::TcpListener, String> {
    let stream = int_opt(fd, libc::SOL_SOCKET, libc::SO_TYPE) == Some(libc::SOCK_STREAM);
    let listening = int_opt(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN) == Some(1);
    if !stream || !listening {
        return Err(format!(
            "--web.systemd-socket: descriptor {fd} from systemd is not a listening stream socket (the .socket unit needs ListenStream=)"
        ));
    }
    // SAFETY: systemd handed this descriptor to this process to own; nothing else uses it.
    let l = unsafe { std::net::TcpListener::from_raw_fd(fd) };
    // A Unix stream socket has no IP address: refused here rather than served as one.
    let addr = l.local_addr().map_err(|e| {
        format!("--web.systemd-socket: descriptor {fd} from systemd is not a TCP socket ({e})")
    })?;
    l.set_nonblocking(true)
        .map_err(|e| format!("--web.systemd-socket: descriptor {fd} ({addr}): {e}"))?;
    Ok(l)
}
