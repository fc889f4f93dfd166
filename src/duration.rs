//! Durations as Prometheus writes them (`model.ParseDuration` in prometheus/common): units
//! `ms`, `s`, `m`, `h`, `d` (24h), `w` (7d) and `y` (365d), each an integer, largest first,
//! each at most once (`1w2d`, `1h30m`, `500ms`). `--idle-after 2w` is then written as in a
//! Prometheus rule next to it.

use std::time::Duration;

/// Milliseconds in each unit, largest first (the order Prometheus requires).
const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
];

/// Parses a Prometheus duration (`1d` is 86 400 s, `2w` 1 209 600 s); `None` where `s` is not
/// one (a fraction, a unit out of order or twice, an unknown unit, an overflow).
pub fn prometheus(s: &str) -> Option<Duration> {
    let mut rest = s.as_bytes();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    // Index into UNITS of the next unit allowed: each comes after the one before it.
    let mut next = 0;
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        rest = &rest[digits..];
        let letters = rest.iter().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = std::str::from_utf8(&rest[..letters]).ok()?;
        rest = &rest[letters..];
        let i = UNITS.iter().position(|(u, _)| *u == unit)?;
        if i < next {
            return None;
        }
        next = i + 1;
        total = total.checked_add(n.checked_mul(UNITS[i].1)?)?;
    }
    Some(Duration::from_millis(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_weeks_and_years_as_prometheus_counts_them() {
        assert_eq!(prometheus("1d"), Some(Duration::from_secs(86_400)));
        assert_eq!(prometheus("2w"), Some(Duration::from_secs(1_209_600)));
        assert_eq!(prometheus("1y"), Some(Duration::from_secs(31_536_000)));
        assert_eq!(prometheus("1w2d3h"), Some(Duration::from_secs(788_400)));
        assert_eq!(prometheus("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(prometheus("1s500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(prometheus("0d"), Some(Duration::ZERO));
    }

    #[test]
    fn what_prometheus_refuses() {
        for bad in [
            "",
            "d",
            "1.5d",
            "1d1w",
            "1d1d",
            "1x",
            "-1d",
            "1 d",
            "1D",
            "99999999999999999999y",
            "999999999999y",
        ] {
            assert_eq!(prometheus(bad), None, "{bad:?}");
        }
    }
}
