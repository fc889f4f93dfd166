//! `process_*`: the exporter's own CPU, memory, descriptors and threads, named as the
//! Prometheus client libraries' process collector names them (client_golang's
//! `collectors.NewProcessCollector`, the `prometheus` crate's `process` feature), so a unit's
//! `MemoryMax=` and `LimitNOFILE=` can be watched with the queries used for every other exporter.
//!
//! Read from `/proc/self` at each scrape (never cached with the exposition: its values move
//! while the state does not), so Linux only; elsewhere, or where a file cannot be read, the
//! families it would give are left out rather than shown as 0.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::catalog::{process, FamilyDef};
use crate::family::Family;

/// What `/proc/self/stat` gives (proc(5)), in the exported units.
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    /// User plus system CPU time, seconds (fields 14 and 15, clock ticks).
    pub cpu_seconds: f64,
    /// Threads (field 20).
    pub threads: f64,
    /// Start time, Unix seconds: boot time plus field 22 (clock ticks since boot).
    pub start_time: f64,
    /// Virtual memory size, bytes (field 23).
    pub virtual_bytes: f64,
    /// Resident set size, bytes (field 24, pages).
    pub resident_bytes: f64,
}

/// Parses a `/proc/PID/stat` line given the boot time (`btime` of `/proc/stat`, Unix seconds),
/// the clock tick rate (`sysconf(_SC_CLK_TCK)`, per second) and the page size (bytes); `None`
/// where it has too few fields or one is no number. The command name (field 2, in parentheses)
/// may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(stat: &str, btime: f64, ticks: f64, page: f64) -> Option<Stat> {
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field N is f[N - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    Some(Stat {
        cpu_seconds: (num(14)? + num(15)?) / ticks,
        threads: num(20)?,
        start_time: btime + num(22)? / ticks,
        virtual_bytes: num(23)?,
        resident_bytes: num(24)? * page,
    })
}

/// The soft limit of `Max open files` in a `/proc/PID/limits` text (`unlimited` is `None`).
pub fn parse_max_fds(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn btime() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn sysconf(name: libc::c_int) -> Option<f64> {
    // SAFETY: sysconf reads a configuration value; no memory is passed.
    let v = unsafe { libc::sysconf(name) };
    (v > 0).then_some(v as f64)
}

/// The family of `def` with one unlabelled sample `v`.
fn one(def: &FamilyDef, v: f64) -> Family {
    Family::of(def).with(vec![], v)
}

/// The process families read now; those whose source cannot be read are left out.
pub fn families() -> Vec<Family> {
    let mut out = Vec::new();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let parsed = stat.as_deref().and_then(|s| {
        parse_stat(
            s,
            btime()?,
            sysconf(libc::_SC_CLK_TCK)?,
            sysconf(libc::_SC_PAGESIZE)?,
        )
    });
    if let Some(s) = parsed {
        out.push(one(&process::CPU_SECONDS, s.cpu_seconds));
        out.push(one(&process::RESIDENT_MEMORY, s.resident_bytes));
        out.push(one(&process::VIRTUAL_MEMORY, s.virtual_bytes));
        out.push(one(&process::START_TIME, s.start_time));
        out.push(one(&process::THREADS, s.threads));
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        // The directory's own descriptor is among the entries, as client_golang counts it.
        out.push(one(&process::OPEN_FDS, dir.count() as f64));
    }
    let limits = std::fs::read_to_string("/proc/self/limits").ok();
    if let Some(max) = limits.as_deref().and_then(parse_max_fds) {
        out.push(one(&process::MAX_FDS, max));
    }
    out
}

/// A scrape's body: the process families read now, then the cached exposition `cached`
/// (plain, or gzip when `gzip`), never copying `cached`.
///
/// Gzip is one member, as every scraper's decoder reads it (a second member would be lost to a
/// decoder that stops after the first, e.g. `flate2::read::GzDecoder`): the cached member's
/// header, the process families deflated and sync-flushed (byte-aligned, not final), the cached
/// member's deflate blocks (which refer to nothing before them), and a trailer whose CRC-32 and
/// length cover both (RFC 1952 §2.3). Where `cached` is not the plain member the cache writes,
/// the process families are left out rather than risk a body no one can read.
pub fn body(cached: Bytes, gzip: bool, v: super::format::Variant) -> Parts {
    // Before the cached body, which ends OpenMetrics' `# EOF` once.
    let text = super::metrics::encode_part(&families(), v, false);
    if !gzip {
        return Parts(vec![Bytes::from(text), cached]);
    }
    let n = cached.len();
    // ID1 ID2 CM=deflate FLG=0: a 10-byte header, no optional fields.
    if n < 18 || cached[..4] != [0x1f, 0x8b, 8, 0] {
        return Parts(vec![cached]);
    }
    use std::io::Write as _;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail; flush is a sync flush (the stream stays open).
    let _ = z.write_all(text.as_bytes());
    let _ = z.flush();
    let mut head = cached[..10].to_vec();
    head.extend_from_slice(z.get_ref());
    let word = |at: usize| {
        u32::from_le_bytes([cached[at], cached[at + 1], cached[at + 2], cached[at + 3]])
    };
    let (crc, len) = (word(n - 8), word(n - 4));
    let mut h = crc32fast::Hasher::new();
    h.update(text.as_bytes());
    h.combine(&crc32fast::Hasher::new_with_initial_len(
        crc,
        u64::from(len),
    ));
    let mut tail = h.finalize().to_le_bytes().to_vec();
    tail.extend_from_slice(&len.wrapping_add(text.len() as u32).to_le_bytes());
    Parts(vec![
        Bytes::from(head),
        cached.slice(10..n - 8),
        Bytes::from(tail),
    ])
}

/// A response body of parts sent one after the other (the cached one shared, not copied).
pub struct Parts(Vec<Bytes>);

impl http_body::Body for Parts {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.0.is_empty() {
            return Poll::Ready(None);
        }
        let b = self.0.remove(0);
        Poll::Ready(Some(Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.iter().map(|b| b.len() as u64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_in_their_units() {
        // A /proc/self/stat of a process named "a) b" (spaces and a parenthesis in the name).
        let line = "4242 (a) b) S 1 4242 4242 0 -1 4194304 1500 0 0 0 \
                    250 50 0 0 20 0 7 0 360000 123456789 2048 18446744073709551615";
        let s = parse_stat(line, 1_700_000_000.0, 100.0, 4096.0).unwrap();
        assert_eq!(
            s,
            Stat {
                cpu_seconds: 3.0,
                threads: 7.0,
                start_time: 1_700_003_600.0,
                virtual_bytes: 123_456_789.0,
                resident_bytes: 8_388_608.0,
            }
        );
        assert_eq!(parse_stat("4242 (x) S 1 2", 0.0, 100.0, 4096.0), None);
    }

    #[test]
    fn max_fds_is_the_soft_limit_getrlimit_gives() {
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) }, 0);
        let fams = families();
        let value = |name: &str| fams.iter().find(|f| f.name == name).map(|f| f.samples[0].1);
        assert_eq!(value("process_max_fds"), Some(rl.rlim_cur as f64));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024.0));
        // This test's own thread and the harness's main one at least.
        assert!(value("process_threads").is_some_and(|n| n >= 2.0));
        // Started before now, after the boot.
        let start = value("process_start_time_seconds").unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(start <= now + 1.0 && start >= btime().unwrap(), "{start}");
    }

    fn collect(p: Parts) -> Vec<u8> {
        use http_body_util::BodyExt as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(p.collect()).unwrap().to_bytes().to_vec()
    }

    #[test]
    fn a_scrape_is_the_process_families_then_the_cached_exposition() {
        use std::io::{Read as _, Write as _};
        let cached = "# TYPE sglang_idle gauge\nsglang_idle{server=\"a\"} 1\n".repeat(300);
        let plain = String::from_utf8(collect(body(
            Bytes::from(cached.clone()),
            false,
            crate::export::format::Variant::TEXT,
        )))
        .unwrap();
        let (process, rest) = plain.split_at(plain.find("# TYPE sglang_idle").unwrap());
        assert_eq!(rest, cached);
        assert!(process.contains("\nprocess_max_fds "), "{process}");
        // Gzip as the cache writes it; one member a single-member decoder reads whole, its CRC
        // and length checked.
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(cached.as_bytes()).unwrap();
        let gz = collect(body(
            Bytes::from(z.finish().unwrap()),
            true,
            crate::export::format::Variant::TEXT,
        ));
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut text)
            .unwrap();
        let at = text.find("# TYPE sglang_idle").unwrap();
        assert!(text[..at].contains("\nprocess_max_fds "), "{text}");
        assert_eq!(&text[at..], cached);
        // Nothing follows the member.
        let mut d = flate2::read::GzDecoder::new(&gz[..]);
        std::io::copy(&mut d, &mut std::io::sink()).unwrap();
        assert!(d.into_inner().is_empty());
    }

    #[test]
    fn a_gzip_body_of_another_shape_is_served_as_it_is() {
        let odd = Bytes::from_static(b"not gzip at all, twenty bytes+");
        assert_eq!(
            collect(body(
                odd.clone(),
                true,
                crate::export::format::Variant::TEXT
            )),
            odd.to_vec()
        );
    }
}
