//! SGLang's line prefix: `[<date> <time>[.mmm] <rank tags>] ` (§6 of sglang-formats.md, printed by
//! `configure_logger` in `python/sglang/srt/utils.py`, later `utils/common.py`), and turning its
//! local time into a Unix timestamp.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use regex::Captures;

use crate::record::{LogTime, RankTag, Ranks};

/// Reads the prefix captures (groups `date`, `time`, `frac`, `tags`) into a time and ranks;
/// `None` when they are malformed (see [`read_prefix_parts`]).
pub fn read_prefix(
    p: &[(String, RankTag)],
    caps: &Captures<'_>,
) -> Option<(Option<LogTime>, Ranks)> {
    let g = |n: &str| caps.name(n).map(|m| m.as_str());
    read_prefix_parts(p, g("date"), g("time"), g("frac"), g("tags"))
}

/// [`read_prefix`] from the text of each group (`None`: the group did not take part), so the
/// parser can feed it from reusable capture locations without allocating.
///
/// Every byte is checked, whatever the prefix regex lets through: `time` must be `HH:MM:SS`
/// and a real time of day, `date` `YYYY-MM-DD` and a real date, `frac` 1 to 9 ASCII digits.
/// Anything else (a non-ASCII digit, `25:00:00`) returns `None`: the prefix is malformed and
/// the line is not read, rather than read with a made-up time.
pub fn read_prefix_parts(
    p: &[(String, RankTag)],
    date: Option<&str>,
    time: Option<&str>,
    frac: Option<&str>,
    tags: Option<&str>,
) -> Option<(Option<LogTime>, Ranks)> {
    let mut ranks = Ranks::default();
    if let Some(tags) = tags {
        for tag in tags.split_ascii_whitespace() {
            set_rank_tag(p, tag, &mut ranks);
        }
    }
    let Some(time) = time else {
        return Some((None, ranks));
    };
    let t = digits(time, b"00:00:00")?;
    let nanos = match frac {
        None => 0,
        Some(f) if (1..=9).contains(&f.len()) && f.bytes().all(|c| c.is_ascii_digit()) => {
            f.parse::<i32>().ok()? * 10i32.pow(9 - f.len() as u32)
        }
        Some(_) => return None,
    };
    let time = Time::new(t[0] as i8, t[1] as i8, t[2] as i8, nanos).ok()?;
    let date = match date {
        None => None,
        Some(d) => {
            let d = digits(d, b"0000-00-00")?;
            Some(Date::new(d[0] as i16, d[1] as i8, d[2] as i8).ok()?)
        }
    };
    Some((
        Some(LogTime {
            date,
            month_day: None,
            time,
        }),
        ranks,
    ))
}

/// The numbers of `s` laid out as `shape` (`0` a digit, anything else that byte exactly), or
/// `None` when `s` is not of that shape.
fn digits(s: &str, shape: &[u8]) -> Option<[u32; 3]> {
    let b = s.as_bytes();
    if b.len() != shape.len() {
        return None;
    }
    let mut out = [0u32; 3];
    let mut i = 0;
    for (c, want) in b.iter().zip(shape) {
        match want {
            b'0' if c.is_ascii_digit() => out[i] = out[i] * 10 + u32::from(c - b'0'),
            b'0' => return None,
            sep if c == sep => i += 1,
            _ => return None,
        }
    }
    Some(out)
}

/// Whether `before` (the text before a line's label, where no valid prefix was found) holds a
/// bracket that opens like SGLang's timestamp (`[2026-0٦-03 …`: four digits and `-`, or two
/// digits and `:`, digits of any script) but is not a valid one. Such a line has a corrupt
/// prefix; reading it as a prefix-less line would invent a rank without tags.
pub fn broken_timestamp(before: &str) -> bool {
    let mut rest = before;
    while let Some(p) = rest.find('[') {
        rest = &rest[p + 1..];
        let mut chars = rest.chars();
        let mut n = 0;
        let sep = loop {
            match chars.next() {
                Some(c) if c.is_numeric() => n += 1,
                other => break other,
            }
        };
        if (n == 4 && sep == Some('-')) || (n == 2 && sep == Some(':')) {
            return true;
        }
    }
    false
}

pub use crate::record::BAD_RANK;

/// Sets the rank a tag like `ATTN_CP1` names; unknown tags are ignored; a number that does not
/// fit, or a second tag for the same rank, sets [`BAD_RANK`].
pub fn set_rank_tag(p: &[(String, RankTag)], tag: &str, ranks: &mut Ranks) {
    for (name, which) in p {
        if let Some(num) = tag.strip_prefix(name.as_str()) {
            if num.bytes().all(|c| c.is_ascii_digit()) && !num.is_empty() {
                let n = num
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n != BAD_RANK)
                    .unwrap_or(BAD_RANK);
                let slot = which.slot(ranks);
                // A tag given twice (`TP0 TP1`) names no one rank: garbage, like a huge number.
                *slot = Some(if slot.is_some() { BAD_RANK } else { n });
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
    /// The last time resolved (Unix seconds): places a repeated local time (the hour the clocks
    /// go back) at its second occurrence once the log has passed the first.
    last_secs: Option<f64>,
    /// The last dated time and what it resolved to, when its hour ran evenly (cached): the same
    /// time again (consecutive lines of one second) resolves the same, with the same effects.
    last_even: Option<(LogTime, f64)>,
}

/// How far back a line may be placed before the previous one and still count as the same
/// pass of a repeated hour (ranks print slightly out of order; a log's clock never goes back
/// by more: SGLang prints local time, which goes back only at the change).
const FOLD_SLACK: f64 = 600.0;

impl TimeResolver {
    /// A resolver for zone `tz`, with `date` for time-only prefixes.
    pub fn new(tz: TimeZone, date: Option<Date>) -> TimeResolver {
        TimeResolver {
            tz,
            fixed_date: date,
            last_date: None,
            last_time: None,
            cache: None,
            last_secs: None,
            last_even: None,
        }
    }

    /// Without `--date`, the first time-only line takes the date of that time's latest past
    /// occurrence: today, or yesterday when today's would still be ahead (a log of the evening
    /// before read after midnight), never a time in the future.
    fn latest_past_date(&self, time: Time, now: jiff::Timestamp) -> Option<Date> {
        let now = now.to_zoned(self.tz.clone());
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

    /// The date of a month and day printed without a year (glog's `I1210`): of the year that
    /// puts it nearest the log's last date (`--date`, else the last date of the input), so a
    /// log read across New Year goes on into the next year; without one, the latest that is
    /// not after tomorrow (now, in the zone; a day's slack for a host's zone), as a time of day
    /// alone takes its latest past day. `None` for a day no year has (`0230`).
    fn year_of(&self, month: i8, day: i8, now: impl Fn() -> jiff::Timestamp) -> Option<Date> {
        if let Some(r) = self.last_date.or(self.fixed_date) {
            return [r.year(), r.year() - 1, r.year() + 1]
                .into_iter()
                .filter_map(|y| Date::new(y, month, day).ok())
                .min_by_key(|d| d.duration_since(r).as_secs().abs());
        }
        let latest = now().to_zoned(self.tz.clone()).date().tomorrow().ok()?;
        // Eight years back at most: February 29 comes once in four (or eight) years.
        (0..=8)
            .filter_map(|back| Date::new(latest.year() - back, month, day).ok())
            .find(|d| *d <= latest)
    }

    /// Whether every time of the hour starting at `dt` (placed at `start`) is `start` plus its
    /// minutes and seconds: the hour's start exists (it is not in a gap) and no offset change
    /// falls inside the hour. Then the hour's start is cached for the lines of that hour.
    fn runs_evenly(&self, dt: DateTime, start: jiff::Timestamp) -> bool {
        let end = jiff::Timestamp::from_second(start.as_second() + 3599);
        // The hour's first or last second occurs twice (the clocks go back): not even.
        let repeated = |d: DateTime| {
            matches!(
                self.tz.to_ambiguous_zoned(d).offset(),
                jiff::tz::AmbiguousOffset::Fold { .. }
            )
        };
        start.to_zoned(self.tz.clone()).datetime() == dt
            && end.is_ok_and(|e| self.tz.to_offset(e) == self.tz.to_offset(start))
            && !repeated(dt)
            && !dt
                .checked_add(jiff::SignedDuration::from_secs(3599))
                .is_ok_and(repeated)
    }

    /// Unix seconds of local `dt`: in a gap, after it; a repeated time at its first occurrence,
    /// or its second once the log is past the first (see [`FOLD_SLACK`]).
    fn place(&self, dt: DateTime) -> Option<i64> {
        let amb = self.tz.to_ambiguous_zoned(dt);
        if matches!(amb.offset(), jiff::tz::AmbiguousOffset::Fold { .. }) {
            let first = amb.clone().earlier().ok()?.timestamp().as_second();
            let second = amb.later().ok()?.timestamp().as_second();
            let passed = self
                .last_secs
                .is_some_and(|p| (first as f64) < p - FOLD_SLACK);
            return Some(if passed { second } else { first });
        }
        Some(amb.compatible().ok()?.timestamp().as_second())
    }

    /// Unix seconds (with fraction) of a prefix time, or `None` if the zone cannot place it.
    /// The same as the zone database's answer for that local time (a time in a gap is placed
    /// after it, as jiff's "compatible" rule does); a repeated one (the hour the clocks go
    /// back) at its first occurrence until the log has passed it, then at its second.
    pub fn resolve(&mut self, t: LogTime) -> Option<f64> {
        self.resolve_at(t, jiff::Timestamp::now)
    }

    /// [`TimeResolver::resolve`] with the wall clock `now` (asked only for a line with no date
    /// when no `--date` is given).
    fn resolve_at(&mut self, t: LogTime, now: impl Fn() -> jiff::Timestamp) -> Option<f64> {
        match self.last_even.take() {
            Some((last, secs)) if last == t => {
                self.last_even = Some((last, secs));
                self.last_secs = Some(secs);
                return Some(secs);
            }
            _ => {}
        }
        let date = match (t.date, t.month_day) {
            (Some(d), _) => {
                self.last_date = Some(d);
                d
            }
            (None, Some((month, day))) => {
                let d = self.year_of(month, day, &now)?;
                self.last_date = Some(d);
                d
            }
            (None, None) => {
                let mut d = match self.last_date.or(self.fixed_date) {
                    Some(d) => d,
                    None => self.latest_past_date(t.time, now())?,
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
        // A date of its own (a month and day pick their year by the log, see `year_of`): the
        // same time again resolves the same.
        let dated = t.date.is_some() || t.month_day.is_some();
        let hour = t.time.hour();
        let within = t.time.minute() as i64 * 60 + t.time.second() as i64;
        let mut even = false;
        let whole = match self.cache {
            Some((d, h, s)) if d == date && h == hour => {
                even = dated;
                s + within
            }
            _ => {
                let dt = DateTime::from_parts(date, Time::new(hour, 0, 0, 0).ok()?);
                let start = dt.to_zoned(self.tz.clone()).ok()?.timestamp();
                if self.runs_evenly(dt, start) {
                    self.cache = Some((date, hour, start.as_second()));
                    even = dated;
                    start.as_second() + within
                } else {
                    // An hour that starts in a gap or holds an offset change (Lord Howe's
                    // 30-minute DST, a change at a half hour): this time on its own.
                    let second = Time::new(hour, t.time.minute(), t.time.second(), 0).ok()?;
                    self.place(DateTime::from_parts(date, second))?
                }
            }
        };
        let secs = whole as f64 + t.time.subsec_nanosecond() as f64 / 1e9;
        // Without a date anywhere, midnight roll-overs of a log longer than a day can carry the
        // guessed date past today: pull it back a day, so no line is placed in the future.
        if !dated && self.fixed_date.is_none() {
            let now = now().as_second() as f64;
            if secs > now + 60.0 {
                self.last_date = self.last_date.and_then(|d| d.yesterday().ok());
                self.cache = None;
                self.last_secs = Some(secs - 86_400.0);
                return Some(secs - 86_400.0);
            }
        }
        self.last_secs = Some(secs);
        if even {
            self.last_even = Some((t, secs));
        }
        Some(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wall clock of these tests: 2026-06-03 10:00:00 UTC.
    const NOW: i64 = 1780480800;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(NOW).unwrap()
    }

    fn at(h: i8, m: i8, s: i8) -> LogTime {
        LogTime {
            date: None,
            month_day: None,
            time: Time::new(h, m, s, 0).unwrap(),
        }
    }

    #[test]
    fn a_time_only_prefix_without_a_date_is_never_in_the_future() {
        let first = |t| TimeResolver::new(TimeZone::UTC, None).resolve_at(t, now);
        // Two minutes and twelve hours ahead of now, as a time of day: both are yesterday's.
        assert_eq!(first(at(10, 2, 0)), Some(1780394520.0)); // 2026-06-02 10:02:00
        assert_eq!(first(at(22, 0, 0)), Some(1780437600.0)); // 2026-06-02 22:00:00
                                                             // A time just passed is today's; so is one up to a minute ahead (clock skew).
        assert_eq!(first(at(9, 59, 55)), Some(1780480795.0));
        assert_eq!(first(at(10, 1, 0)), Some(1780480860.0));
        assert_eq!(first(at(10, 1, 1)), Some(1780480861.0 - 86_400.0));
    }

    /// glog's `I1210` and vLLM's `12-10` print no year: the log's own dates give it (across
    /// New Year into the next), else the latest year that puts it no later than tomorrow.
    #[test]
    fn a_month_and_day_take_the_logs_year_or_the_latest_past_one() {
        let md = |m, d, h, mi, s| LogTime {
            date: None,
            month_day: Some((m, d)),
            time: Time::new(h, mi, s, 0).unwrap(),
        };
        let first = |t, now: i64| {
            TimeResolver::new(TimeZone::UTC, None)
                .resolve_at(t, || jiff::Timestamp::from_second(now).unwrap())
        };
        // Read on 2026-06-03: December 10th was last year's.
        assert_eq!(first(md(12, 10, 14, 2, 13), NOW), Some(1765375333.0));
        // Read on 2026-12-04 (2026-12-10 is ahead): still last year's; on 2026-12-20, this year's.
        assert_eq!(first(md(12, 10, 14, 2, 13), 1796342400), Some(1765375333.0));
        assert_eq!(first(md(12, 10, 14, 2, 13), 1798156800), Some(1796911333.0));
        // February 29th: the last leap year's.
        assert_eq!(first(md(2, 29, 12, 0, 0), NOW), Some(1709208000.0));
        // After a dated line of 2025-12-31, January 1st is 2026's, whatever the wall clock.
        let mut r = TimeResolver::new(TimeZone::UTC, None);
        let dated = LogTime {
            date: Some(jiff::civil::date(2025, 12, 31)),
            month_day: None,
            time: Time::new(23, 59, 0, 0).unwrap(),
        };
        assert!(r.resolve_at(dated, now).is_some());
        assert_eq!(r.resolve_at(md(1, 1, 0, 0, 30), now), Some(1767225630.0));
        // And a time of day alone after it is that day's.
        assert_eq!(r.resolve_at(at(0, 1, 0), now), Some(1767225660.0));
    }

    #[test]
    fn a_time_only_log_longer_than_a_day_never_reaches_the_future() {
        let mut r = TimeResolver::new(TimeZone::UTC, None);
        // 05:00, 12:00, 20:00, 03:00 (next day), 06:00, 12:00, 20:00, 03:00, 06:00: two days.
        // The first 05:00 is today's (the latest past one); a 12:00 after it would be ahead of
        // now, so it is pulled back a day, and the days after it follow from there. (Without a
        // date a log longer than a day cannot be placed right; never in the future is the rule.)
        let got: Vec<f64> = [5, 12, 20, 3, 6, 12, 20, 3, 6]
            .into_iter()
            .map(|h| r.resolve_at(at(h, 0, 0), now).unwrap())
            .collect();
        let (d2_12, d2_20, d3_03, d3_05, d3_06) = (
            1780401600.0,
            1780430400.0,
            1780455600.0,
            1780462800.0,
            1780466400.0,
        );
        assert_eq!(
            got,
            [d3_05, d2_12, d2_20, d3_03, d3_06, d2_12, d2_20, d3_03, d3_06]
        );
        assert!(got.iter().all(|&t| t <= NOW as f64 + 60.0));
    }

    #[test]
    fn malformed_prefixes_are_refused_not_misread() {
        let p = crate::parse::patterns::Patterns::embedded()
            .unwrap()
            .rank_tags;
        let ok = read_prefix_parts(
            &p,
            Some("2026-06-03"),
            Some("10:00:21"),
            Some("345"),
            Some(" TP1"),
        );
        let (t, r) = ok.unwrap();
        assert_eq!(t.unwrap().time, Time::new(10, 0, 21, 345_000_000).unwrap());
        assert_eq!(r.tp, Some(1));
        for (date, time, frac) in [
            (Some("2026-0\u{0666}-03"), Some("10:00:00"), None),
            (None, Some("1\u{0660}:00:00"), None),
            (None, Some("9:05:00"), None),
            (None, Some("25:00:00"), None),
            (Some("2026-13-03"), Some("10:00:00"), None),
            (None, Some("10:00:00"), Some("1234567890")),
            (None, Some("10:00:00"), Some("\u{0661}")),
        ] {
            assert_eq!(
                read_prefix_parts(&p, date, time, frac, None),
                None,
                "{date:?} {time:?} {frac:?}"
            );
        }
        assert!(broken_timestamp("[2026-0\u{0666}-03 10:00:00 TP0] "));
        assert!(broken_timestamp("x [1\u{0660}:00:00] "));
        assert!(!broken_timestamp("python[1234]: "));
        assert!(!broken_timestamp("[gpu_id=0] "));
        assert!(!broken_timestamp("[2001:db8::1]:5 - "));
    }

    #[test]
    fn the_repeated_hour_is_placed_by_the_lines_before_it() {
        // Berlin goes back from 03:00 CEST to 02:00 CET on 2026-10-25 (01:00 UTC).
        let mut r = TimeResolver::new(TimeZone::get("Europe/Berlin").unwrap(), None);
        let at = |h, m, s| LogTime {
            date: Some(jiff::civil::date(2026, 10, 25)),
            month_day: None,
            time: Time::new(h, m, s, 0).unwrap(),
        };
        // First pass (CEST): 02:50 and a rank printing a little out of order.
        assert_eq!(r.resolve(at(2, 50, 0)), Some(1_792_889_400.0));
        assert_eq!(r.resolve(at(2, 49, 30)), Some(1_792_889_370.0));
        assert_eq!(r.resolve(at(2, 59, 59)), Some(1_792_889_999.0));
        // Second pass (CET): the log has passed 02:00:05 CEST by an hour.
        assert_eq!(r.resolve(at(2, 0, 5)), Some(1_792_890_005.0));
        assert_eq!(r.resolve(at(2, 10, 0)), Some(1_792_890_600.0));
        assert_eq!(r.resolve(at(3, 0, 0)), Some(1_792_893_600.0));
        // A log that starts in the repeated hour takes its first pass.
        let mut fresh = TimeResolver::new(TimeZone::get("Europe/Berlin").unwrap(), None);
        assert_eq!(fresh.resolve(at(2, 10, 0)), Some(1_792_887_000.0));
    }

    #[test]
    fn a_time_repeated_resolves_as_it_did_across_the_repeated_hour_and_midnight() {
        // Consecutive lines of one second reuse the last answer: the same as working it out
        // again, with the same effects on what follows (the fold, midnight).
        let d = |day| Some(jiff::civil::date(2026, 10, day));
        let at = |date, h, m, s| LogTime {
            date,
            month_day: None,
            time: Time::new(h, m, s, 0).unwrap(),
        };
        let times = [
            at(d(25), 1, 59, 59),
            at(d(25), 2, 50, 0),
            at(d(25), 2, 50, 0),
            at(d(25), 2, 59, 59),
            at(d(25), 2, 0, 5),
            at(d(25), 2, 0, 5),
            at(d(25), 2, 10, 0),
            at(d(25), 3, 0, 0),
            at(d(25), 3, 0, 0),
            at(None, 23, 59, 59),
            at(None, 23, 59, 59),
            at(None, 0, 0, 1),
            at(d(26), 0, 0, 1),
            at(d(26), 0, 0, 1),
            at(None, 0, 0, 1),
        ];
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let mut memo = TimeResolver::new(tz.clone(), None);
        let mut fresh = TimeResolver::new(tz, None);
        for t in times {
            fresh.last_even = None;
            assert_eq!(memo.resolve_at(t, now), fresh.resolve_at(t, now), "{t:?}");
        }
    }

    #[test]
    fn resolves_utc_and_midnight() {
        let mut r = TimeResolver::new(TimeZone::UTC, Some(jiff::civil::date(2024, 10, 1)));
        let t = |h, m, s| LogTime {
            date: None,
            month_day: None,
            time: Time::new(h, m, s, 0).unwrap(),
        };
        assert_eq!(r.resolve(t(23, 59, 59)), Some(1727827199.0));
        assert_eq!(r.resolve(t(0, 0, 1)), Some(1727827201.0));
        let full = LogTime {
            date: Some(jiff::civil::date(2026, 6, 3)),
            month_day: None,
            time: Time::new(10, 0, 21, 345_000_000).unwrap(),
        };
        assert_eq!(r.resolve(full), Some(1780480821.345));
    }
}
