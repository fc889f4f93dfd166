//! SGLang's line prefix: `[<date> <time>[.mmm] <rank tags>] ` (§6 of sglang-formats.md, printed by
//! `configure_logger` in `python/sglang/srt/utils.py`, later `utils/common.py`), and turning its
//! local time into a Unix timestamp.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use regex::Captures;

use crate::parse::patterns::{Patterns, RankTag};
use crate::record::{LogTime, Ranks};

/// Reads the prefix captures (groups `date`, `time`, `frac`, `tags`) into a time and ranks.
pub fn read_prefix(p: &Patterns, caps: &Captures<'_>) -> (Option<LogTime>, Ranks) {
    let g = |n: &str| caps.name(n).map(|m| m.as_str());
    read_prefix_parts(p, g("date"), g("time"), g("frac"), g("tags"))
}

/// [`read_prefix`] from the text of each group (`None`: the group did not take part), so the
/// parser can feed it from reusable capture locations without allocating.
pub fn read_prefix_parts(
    p: &Patterns,
    date: Option<&str>,
    time: Option<&str>,
    frac: Option<&str>,
    tags: Option<&str>,
) -> (Option<LogTime>, Ranks) {
    let mut ranks = Ranks::default();
    if let Some(tags) = tags {
        for tag in tags.split_ascii_whitespace() {
            set_rank_tag(p, tag, &mut ranks);
        }
    }
    let time = time.and_then(|t| {
        let b = t.as_bytes();
        let num = |i: usize| ((b[i] - b'0') * 10 + (b[i + 1] - b'0')) as i8;
        let nanos = frac.map_or(0, |s| {
            let n: i32 = s.parse().unwrap_or(0);
            n * 10i32.pow(9 - s.len() as u32)
        });
        let time = Time::new(num(0), num(3), num(6), nanos).ok()?;
        let date = date.and_then(|s| {
            Date::new(
                s[0..4].parse().ok()?,
                s[5..7].parse().ok()?,
                s[8..10].parse().ok()?,
            )
            .ok()
        });
        Some(LogTime { date, time })
    });
    (time, ranks)
}

/// A rank number too large for a rank (`TP4294967296`): such a line is garbage and is not
/// parsed, rather than merged into the series of a rank without that tag.
pub const BAD_RANK: u32 = u32::MAX;

/// Sets the rank a tag like `ATTN_CP1` names; unknown tags are ignored; a number that does not
/// fit sets [`BAD_RANK`].
pub fn set_rank_tag(p: &Patterns, tag: &str, ranks: &mut Ranks) {
    for (name, which) in &p.rank_tags {
        if let Some(num) = tag.strip_prefix(name.as_str()) {
            if num.bytes().all(|c| c.is_ascii_digit()) && !num.is_empty() {
                let n = num
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n != BAD_RANK)
                    .unwrap_or(BAD_RANK);
                let slot = match which {
                    RankTag::Dp => &mut ranks.dp,
                    RankTag::Pp => &mut ranks.pp,
                    RankTag::AttnCp => &mut ranks.attn_cp,
                    RankTag::MoeDp => &mut ranks.moe_dp,
                    RankTag::Tp => &mut ranks.tp,
                    RankTag::Ep => &mut ranks.ep,
                };
                *slot = Some(n);
                return;
            }
        }
    }
}

/// Turns prefix times (local, no timezone) into Unix seconds.
///
/// SGLang prints the process's local time. The zone is `--timezone` (default: this host's).
/// A time without a date (v0.2.14-v0.3.3.post1) takes the date of `--date`, else the last full
/// date seen in the same input, else today; it rolls to the next day when the clock goes back by
/// more than 12 hours (midnight).
#[derive(Debug, Clone)]
pub struct TimeResolver {
    tz: TimeZone,
    fixed_date: Option<Date>,
    last_date: Option<Date>,
    last_time: Option<Time>,
    /// (date, hour) → Unix seconds of that hour's start, so most lines skip the zone lookup.
    cache: Option<(Date, i8, i64)>,
}

impl TimeResolver {
    /// A resolver for zone `tz`, with `date` for time-only prefixes.
    pub fn new(tz: TimeZone, date: Option<Date>) -> TimeResolver {
        TimeResolver {
            tz,
            fixed_date: date,
            last_date: None,
            last_time: None,
            cache: None,
        }
    }

    /// Without `--date`, the first time-only line takes the date of that time's latest past
    /// occurrence: today, or yesterday when today's would still be ahead (a log of the evening
    /// before read after midnight), never a time in the future.
    fn latest_past_date(&self, time: Time) -> Option<Date> {
        let now = jiff::Zoned::now().with_time_zone(self.tz.clone());
        let today = now.date();
        let candidate = DateTime::from_parts(today, time)
            .to_zoned(self.tz.clone())
            .ok()?;
        if candidate.timestamp() > now.timestamp() + jiff::SignedDuration::from_secs(60) {
            today.yesterday().ok()
        } else {
            Some(today)
        }
    }

    /// Unix seconds (with fraction) of a prefix time, or `None` if the zone cannot place it.
    pub fn resolve(&mut self, t: LogTime) -> Option<f64> {
        let date = match t.date {
            Some(d) => {
                self.last_date = Some(d);
                d
            }
            None => {
                let mut d = match self.last_date.or(self.fixed_date) {
                    Some(d) => d,
                    None => self.latest_past_date(t.time)?,
                };
                if let Some(prev) = self.last_time {
                    // The clock went back by more than 12 h: midnight passed.
                    if prev.duration_until(t.time).as_secs() < -12 * 3600 {
                        d = d.tomorrow().ok()?;
                    }
                }
                self.last_date = Some(d);
                d
            }
        };
        self.last_time = Some(t.time);
        let hour = t.time.hour();
        let base = match self.cache {
            Some((d, h, s)) if d == date && h == hour => s,
            _ => {
                let dt = DateTime::from_parts(date, Time::new(hour, 0, 0, 0).ok()?);
                let s = dt.to_zoned(self.tz.clone()).ok()?.timestamp().as_second();
                self.cache = Some((date, hour, s));
                s
            }
        };
        let within = t.time.minute() as i64 * 60 + t.time.second() as i64;
        let secs = (base + within) as f64 + t.time.subsec_nanosecond() as f64 / 1e9;
        // Without a date anywhere, midnight roll-overs of a log longer than a day can carry the
        // guessed date past today: pull it back a day, so no line is placed in the future.
        if t.date.is_none() && self.fixed_date.is_none() {
            let now = jiff::Timestamp::now().as_second() as f64;
            if secs > now + 60.0 {
                self.last_date = self.last_date.and_then(|d| d.yesterday().ok());
                self.cache = None;
                return Some(secs - 86_400.0);
            }
        }
        Some(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_only_prefix_without_a_date_is_never_in_the_future() {
        let now = jiff::Timestamp::now();
        let mut r = TimeResolver::new(TimeZone::UTC, None);
        // One minute and twelve hours ahead of now, as a time of day: both are yesterday's.
        for ahead in [120, 12 * 3600] {
            let later = now.to_zoned(TimeZone::UTC).time() + jiff::SignedDuration::from_secs(ahead);
            let mut fresh = TimeResolver::new(TimeZone::UTC, None);
            let got = fresh
                .resolve(LogTime {
                    date: None,
                    time: later,
                })
                .unwrap();
            assert!(got <= now.as_second() as f64 + 60.0, "{ahead}: {got} > now");
            assert!(
                got > now.as_second() as f64 - 86_400.0,
                "{ahead}: {got} too old"
            );
        }
        // A time just passed is today's.
        let earlier = now.to_zoned(TimeZone::UTC).time() - jiff::SignedDuration::from_secs(5);
        let got = r
            .resolve(LogTime {
                date: None,
                time: earlier,
            })
            .unwrap();
        assert!((now.as_second() as f64 - got - 5.0).abs() < 2.0, "{got}");
    }

    #[test]
    fn a_time_only_log_longer_than_a_day_never_reaches_the_future() {
        let now = jiff::Timestamp::now();
        let mut r = TimeResolver::new(TimeZone::UTC, None);
        let t = |h| LogTime {
            date: None,
            time: Time::new(h, 0, 0, 0).unwrap(),
        };
        // 05:00, 12:00, 20:00, 03:00 (next day), 06:00, 12:00, 20:00, 03:00, 06:00: two days.
        let mut last = 0.0;
        for h in [5, 12, 20, 3, 6, 12, 20, 3, 6] {
            last = r.resolve(t(h)).unwrap();
            assert!(
                last <= now.as_second() as f64 + 60.0,
                "{h}:00 placed at {last}"
            );
        }
        assert!(last > now.as_second() as f64 - 2.0 * 86_400.0);
    }

    #[test]
    fn resolves_utc_and_midnight() {
        let mut r = TimeResolver::new(TimeZone::UTC, Some(jiff::civil::date(2024, 10, 1)));
        let t = |h, m, s| LogTime {
            date: None,
            time: Time::new(h, m, s, 0).unwrap(),
        };
        assert_eq!(r.resolve(t(23, 59, 59)), Some(1727827199.0));
        assert_eq!(r.resolve(t(0, 0, 1)), Some(1727827201.0));
        let full = LogTime {
            date: Some(jiff::civil::date(2026, 6, 3)),
            time: Time::new(10, 0, 21, 345_000_000).unwrap(),
        };
        assert_eq!(r.resolve(full), Some(1780480821.345));
    }
}
