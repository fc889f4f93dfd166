//! Foreign prefixes: what a fork or a launcher prints before SGLang's body in place of SGLang's
//! own `[TIME TP0] ` (`configure_logger` in `python/sglang/srt/utils.py`), e.g. a bracket of
//! its own, `[2025-12-10 14:02:13.102 GPU=0 Worker 0 (model_1) TP=0] Prefill batch. …`, several
//! models' schedulers in one file. A line whose body is a known SGLang kind is read whatever
//! comes before it; from the prefix this module takes what it can recognise:
//!
//! * the time (`YYYY-MM-DD HH:MM:SS[.,frac]`, or a time of day alone), a local time as SGLang's
//!   own (`--timezone`); a zoned or Unix time is left unread (a local reading would be off by
//!   the zone), and `check` prints the `stream_prefixes` entry whose `ts` group reads it;
//! * rank tags by the pattern file's `rank_tags`, in every spelling a prefix uses (`TP0`,
//!   `TP=0`, `tp:0`, `TP 0`, `tp_rank=1`, `DP 1`: see [`super::words`]);
//! * the GPU (`GPU=0`, `gpu_id=1`): the device of a rank, not a writer; a second GPU printing
//!   a rank another GPU printed is a writer apart (`crate::pipeline::gpus`);
//! * the words that name a writer are its identity, its own engine
//!   (`engine="Worker 0 (model_1)"`), so two models' `TP0` never merge. Times (any digits of a
//!   time), rank tags, GPU numbers, log levels, separators, Python logger names, source
//!   locations and whatever changes from line to line (a run of digits, `seq=N`, `#N`, `pid=N`,
//!   glog's thread id) are not part of it ([`super::words`]).
//!
//! A prefix that opens like a time but holds no valid one (`[2026-0٦-03 …`, `25:00:00`), or
//! a rank that does not fit, makes the line unread (counted), never read with a made-up time or
//! rank. Only a prefix that ends like one (`]`, `)`, `|`, `>`) and quotes nothing is read: text
//! before a label that ends otherwise (`warning: …`, a quoted prompt) is not a prefix.

use std::sync::OnceLock;

use regex::Regex;

use super::prefix::{read_prefix_parts, BAD_RANK};
use super::stream::join;
use super::words::{self, Word};
use crate::record::{Class, LogTime, RankTag, Ranks};

/// The most bytes of a foreign prefix read (SGLang's own is under 60).
const MAX_PREFIX: usize = 256;

/// What [`read`] made of the text before a line's label.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Read {
    /// No foreign prefix (nothing before the label, or text that is not a prefix).
    Nothing,
    /// A prefix with a malformed time or rank: the line is not read.
    Refused,
    /// A foreign prefix: its time and ranks (its identity in the caller's buffer).
    Prefix {
        /// Its local time, if it has one that reads as local.
        time: Option<LogTime>,
        /// The ranks its tags name.
        ranks: Ranks,
        /// The GPU it names (`GPU=4`): the device of its rank, which tells two schedulers of
        /// one rank apart ([`crate::pipeline::nodes`]).
        gpu: Option<u32>,
    },
}

/// Whether lines of `class` are read after a foreign prefix: the kinds whose label starts
/// SGLang's body (stats lines, startup facts, the `server_args` dump, a listen line). An access line's match
/// starts inside uvicorn's text and a request record's inside its own; the text before them
/// is no prefix.
pub fn reads(class: Class) -> bool {
    matches!(
        class,
        Class::Prefill
            | Class::Decode
            | Class::Retract
            | Class::Fact
            | Class::ServerArgs
            | Class::Listen
    )
}

/// The time forms a foreign prefix may hold: a date and time (`T` or a space between, `.` or
/// `,` before the fraction, a zone after: an offset, attached or after a space, or after a space
/// a zone's abbreviation, so that a zone is never read as local time nor taken for a writer's
/// name), a time of day, maybe after a month and day without year (`12-10 14:02:13` as
/// vLLM-style formats print it, `I1210 14:02:13.123456` as glog does, its level letter
/// first: the year is the log's, see `TimeResolver`), or a Unix time of 10 digits (seconds,
/// then ms, µs or ns) with a fraction.
fn time_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?-u:\b)(?:(?:(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[ T]|(?P<md>[0-9]{2}-[0-9]{2}) |(?P<glog>[IWEF][0-9]{4}) )?(?P<time>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,](?P<frac>[0-9]{1,9}))?(?:(?P<zone>Z|[+-][0-9]{2}:?[0-9]{2})| (?P<szone>[+-][0-9]{2}:?[0-9]{2})| (?P<zname>UTC|GMT|WET|WEST|BST|IST|CET|CEST|EET|EEST|MSK|SAST|PKT|HKT|SGT|JST|KST|AWST|ACST|AEST|AEDT|NZST|NZDT|HST|AKST|AKDT|PST|PDT|MST|MDT|CST|CDT|EST|EDT))?|(?P<unix>[0-9]{10}(?:[0-9]{3}){0,3}(?:\.[0-9]{1,9})?))(?-u:\b)",
        )
        .expect("the time regex compiles")
    })
}

/// The time of a foreign prefix `p` (trimmed) and the span it takes: `Ok(None)` without one
/// (or with a zoned or Unix one, not read as local time), `Err(())` for a prefix that opens
/// like a time but holds no valid one.
type TimePart = Result<(Option<LogTime>, (usize, usize)), ()>;

fn time_part(tags: &[(String, RankTag)], p: &str) -> TimePart {
    let found = time_regex().captures(p);
    let at = found.as_ref().and_then(|c| c.get(0)).map(|m| m.start());
    // Every bracket that opens like a time (digits of any script) opens with the time read.
    if time_openings(p).any(|i| Some(i) != at) {
        return Err(());
    }
    let Some(c) = found else {
        return Ok((None, (0, 0)));
    };
    let g = |n: &str| c.name(n).map(|m| m.as_str());
    let cut = c.get(0).map_or((0, 0), |m| (m.start(), m.end()));
    if ["unix", "zone", "szone", "zname"]
        .iter()
        .any(|n| g(n).is_some())
    {
        return Ok((None, cut));
    }
    let Some((Some(mut t), _)) = read_prefix_parts(tags, g("date"), g("time"), g("frac"), None)
    else {
        return Err(());
    };
    // A month and day without a year: vLLM's `12-10`, glog's `I1210` (its level letter first).
    let md = g("md")
        .map(|m| (&m[..2], &m[3..]))
        .or_else(|| g("glog").map(|m| (&m[1..3], &m[3..])));
    if let Some((m, d)) = md {
        let (m, d) = (
            m.parse::<i8>().map_err(|_| ())?,
            d.parse::<i8>().map_err(|_| ())?,
        );
        // A day no year has (`1332`) is a malformed time, not a time of some other day.
        if jiff::civil::Date::new(2000, m, d).is_err() {
            return Err(());
        }
        t.month_day = Some((m, d));
    }
    Ok((Some(t), cut))
}

/// `before` trimmed, when it may be a foreign prefix: not empty, quoting nothing, and ending
/// like a prefix. (One longer than [`MAX_PREFIX`] is not read: see [`read`].)
/// A prefix may also end in rank tags after its closer (`…scheduler.py:1234] TP1 `: glog's
/// prefix, then the rank SGLang's logger adds), or those ranks would be lost and the ranks read
/// as one.
fn prefix_like<'b>(tags: &[(String, RankTag)], before: &'b str) -> Option<&'b str> {
    const CLOSERS: [char; 4] = [']', ')', '|', '>'];
    let p = before.trim();
    if p.is_empty() || p.contains(['"', '\'']) {
        return None;
    }
    if p.ends_with(CLOSERS) {
        return Some(p);
    }
    let tail = &p[p.rfind(CLOSERS)? + 1..];
    let mut it = tail.split_whitespace().peekable();
    let mut ranks = false;
    while let Some(w) = it.next() {
        match words::classify(tags, w) {
            Word::Rank(_, Some(_)) => {}
            Word::Rank(_, None) if it.next_if(|n| words::digits(n)).is_some() => {}
            _ => return None,
        }
        ranks = true;
    }
    ranks.then_some(p)
}

/// The local time of the foreign prefix `before` (whatever its ranks), for a line no kind
/// reads that may still be the input's last timed line (`Parser::prefix_time`).
pub fn time(tags: &[(String, RankTag)], before: &str) -> Option<LogTime> {
    let p = prefix_like(tags, before).filter(|p| p.len() <= MAX_PREFIX)?;
    time_part(tags, p).ok()?.0
}

/// Reads `before` (the text before a line's label, SGLang's own prefix absent) as a foreign
/// prefix, its identity into `identity` (cleared first; words joined by a space). What each
/// word says is [`words::classify`]'s: only words that name a writer make the identity.
pub fn read(tags: &[(String, RankTag)], before: &str, identity: &mut String) -> Read {
    identity.clear();
    let Some(p) = prefix_like(tags, before) else {
        return Read::Nothing;
    };
    // Too long to be any launcher's prefix (a garbled or hostile one): not read, and not
    // passed over either, or its rank tags would be lost and the line read as another rank's.
    if p.len() > MAX_PREFIX {
        return Read::Refused;
    }
    let Ok((time, cut)) = time_part(tags, p) else {
        return Read::Refused;
    };
    let mut ranks = Ranks::default();
    let mut gpu = None;
    let ok = [&p[..cut.0], &p[cut.1..]]
        .into_iter()
        .all(|s| read_words(tags, s, identity, &mut ranks, &mut gpu));
    if !ok {
        identity.clear();
        return Read::Refused;
    }
    // A GPU alone is no foreign prefix: SGLang's own `[gpu_id=0] ` (v0.1.17-v0.2.13) names the
    // rank, which the parser's `gpu_id` rule reads.
    if identity.is_empty() && time.is_none() && ranks == Ranks::default() {
        return Read::Nothing;
    }
    Read::Prefix { time, ranks, gpu }
}

/// Reads the words of `s` (a prefix's text on one side of its time) into `identity`, `ranks`
/// and `gpu`; `false` for a malformed rank or GPU (a number that does not fit, a second one).
fn read_words(
    tags: &[(String, RankTag)],
    s: &str,
    identity: &mut String,
    ranks: &mut Ranks,
    gpu: &mut Option<u32>,
) -> bool {
    let mut it = s
        .split(delimiter)
        .map(|w| w.trim_end_matches([',', ';']))
        .filter(|w| !w.is_empty())
        .peekable();
    // The last word joined names a writer a number may follow (`Worker 0`).
    let mut numbered = false;
    while let Some(w) = it.next() {
        let after_name = std::mem::take(&mut numbered);
        match words::classify(tags, w) {
            Word::Skip => {}
            Word::Bad => return false,
            Word::Rank(which, num) => {
                let Some(num) = num.or_else(|| it.next_if(|n| words::digits(n))) else {
                    return false;
                };
                let slot = which.slot(ranks);
                match num.parse::<u32>().ok().filter(|&n| n != BAD_RANK) {
                    Some(n) if slot.is_none() => *slot = Some(n),
                    _ => return false,
                }
            }
            Word::Gpu(num) => {
                let Some(num) = num.or_else(|| it.next_if(|n| words::digits(n))) else {
                    return false;
                };
                match num.parse::<u32>() {
                    Ok(n) if gpu.is_none_or(|g| g == n) => *gpu = Some(n),
                    _ => return false,
                }
            }
            // A number names a writer only as part of a name (`Worker 0`); a longer one than
            // any name holds is garbage, not a name.
            Word::Number if after_name => {
                if w.len() > words::MAX_NAME_NUMBER {
                    return false;
                }
                join(identity, w);
            }
            Word::Number => {}
            Word::Name { numbered: n } => {
                join(identity, w);
                numbered = n;
            }
        }
    }
    true
}

/// Where the brackets of `p` that open like a time (`[2026-…`, `[14:…`: four digits and `-`, or
/// two and `:`, digits of any script, as `prefix::broken_timestamp` tells) have their first byte
/// after the `[`.
fn time_openings(p: &str) -> impl Iterator<Item = usize> + '_ {
    p.match_indices('[').map(|(i, _)| i + 1).filter(|&i| {
        let mut n = 0;
        let sep = p[i..].chars().find(|c| {
            n += 1;
            !c.is_numeric()
        });
        (n == 5 && sep == Some('-')) || (n == 3 && sep == Some(':'))
    })
}

/// The characters that end a word of a prefix (and are matched as themselves).
fn delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, '[' | ']' | '|' | '<' | '>')
}

/// The rank group of a stream prefix (src/parse/stream.rs) that `tag` sets.
fn group(tag: RankTag) -> &'static str {
    match tag {
        RankTag::Dp => "dp",
        RankTag::Pp => "pp",
        RankTag::AttnCp => "attn_cp",
        RankTag::MoeDp => "moe_dp",
        RankTag::Tp => "tp",
        RankTag::Ep => "ep",
    }
}

/// A `stream_prefixes` entry that reads the foreign prefix `before` as [`read`] does (for
/// `check`): its time as `date`/`time`/`frac` (`ts` when zoned or Unix, which the entry then
/// reads exactly), rank tags as rank groups, GPU numbers as any number, and the first run of
/// identity words as the `engine` group (each word any word: one entry for every writer of
/// that shape).
pub fn entry(tags: &[(String, RankTag)], before: &str) -> String {
    let p = before.trim_start();
    let time = time_regex().captures(p);
    let span = time
        .as_ref()
        .and_then(|c| c.get(0))
        .map_or((p.len(), p.len()), |m| (m.start(), m.end()));
    // What the word before said, for a number after it: part of a name (`Worker 0`), a
    // rank's or a GPU's (`TP 0`, `GPU 3`), or nothing.
    #[derive(Clone, Copy)]
    enum Before {
        Other,
        Name,
        Rank(&'static str),
    }
    let mut before = Before::Other;
    // The pattern of each word; `None` for an identity word.
    let mut word = |w: &str| -> Option<String> {
        let bare = w.trim_end_matches([',', ';']);
        let tail = regex::escape(&w[bare.len()..]);
        let prev = std::mem::replace(&mut before, Before::Other);
        let numbered = |num: &str, pat: &str| {
            let name = regex::escape(&bare[..bare.len() - num.len()]);
            format!("{name}{pat}{tail}")
        };
        match words::classify(tags, bare) {
            Word::Name { numbered } => {
                if numbered {
                    before = Before::Name;
                }
                None
            }
            Word::Number => match prev {
                Before::Name => None,
                Before::Rank(g) => Some(format!("(?P<{g}>[0-9]+){tail}")),
                Before::Other => Some(format!("[0-9]+{tail}")),
            },
            Word::Rank(which, Some(num)) => {
                Some(numbered(num, &format!("(?P<{}>[0-9]+)", group(which))))
            }
            Word::Gpu(Some(num)) => Some(numbered(num, "[0-9]+")),
            Word::Rank(which, None) => {
                before = Before::Rank(group(which));
                Some(regex::escape(w))
            }
            // A GPU's number after a space is any number, as a number alone is.
            Word::Gpu(None) | Word::Bad => Some(regex::escape(w)),
            // A counter, a thread id, a source location: any word there (each line's own).
            Word::Skip
                if bare.bytes().any(|c| c.is_ascii_digit()) || words::source_location(bare) =>
            {
                Some(format!("[^ \\[\\]]+{tail}"))
            }
            Word::Skip => Some(regex::escape(w)),
        }
    };
    let mut re = String::new();
    // The engine group's words so far (open while some), whether a space after them waits,
    // and whether it was written.
    let (mut open, mut space, mut done) = (0usize, false, false);
    let close = |re: &mut String, open: &mut usize, space: &mut bool, done: &mut bool| {
        if *open > 0 {
            re.push_str(&engine_words(*open));
            *open = 0;
            *done = true;
        }
        if std::mem::take(space) {
            re.push(' ');
        }
    };
    let mut at = 0;
    while at < p.len() {
        if at == span.0 {
            close(&mut re, &mut open, &mut space, &mut done);
            let c = time.as_ref().expect("a time where its span is");
            let date = c.name("date");
            // A month and day without year: matched, not read (the entry has no group for it).
            let md = match (c.name("md"), c.name("glog")) {
                (Some(_), _) => "[0-9][0-9]-[0-9][0-9] ",
                (_, Some(_)) => "[IWEF][0-9]{4} ",
                _ => "",
            };
            if c.name("unix").is_some() || c.name("zone").is_some() {
                re.push_str("(?P<ts>[^ \\]]+)");
            } else if c.name("szone").is_some() || c.name("zname").is_some() {
                // A zone after a space: with a date and an offset the `ts` group reads the time
                // exactly; otherwise (a time of day, a zone's name, which gives no offset) the
                // time is matched and left unread, as `read` leaves it.
                let exact = date.is_some() && c.name("szone").is_some();
                re.push_str(if exact { "(?P<ts>" } else { "(?:" });
                re.push_str(md);
                if let Some(d) = date {
                    re.push_str("[0-9]{4}-[0-9][0-9]-[0-9][0-9]");
                    re.push_str(&regex::escape(&p[d.end()..d.end() + 1]));
                }
                re.push_str("[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:[.,][0-9]{1,9})? ");
                match c.name("zname") {
                    Some(z) => re.push_str(z.as_str()),
                    None => re.push_str("[+-][0-9][0-9]:?[0-9][0-9]"),
                }
                re.push(')');
            } else {
                re.push_str(md);
                if let Some(d) = date {
                    re.push_str("(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])");
                    re.push_str(&regex::escape(&p[d.end()..d.end() + 1]));
                }
                re.push_str("(?P<time>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])");
                if c.name("frac").is_some() {
                    re.push_str("[.,](?P<frac>[0-9]{1,9})");
                }
            }
            at = span.1;
            continue;
        }
        let c = p[at..].chars().next().unwrap_or(' ');
        if delimiter(c) {
            // One space after an identity word may go on inside the engine group.
            if c == ' ' && open > 0 && !space {
                space = true;
            } else {
                close(&mut re, &mut open, &mut space, &mut done);
                re.push_str(&regex::escape(&p[at..at + c.len_utf8()]));
            }
            at += c.len_utf8();
            continue;
        }
        let stop = if span.0 > at { span.0 } else { p.len() };
        let end = p[at..]
            .find(delimiter)
            .map_or(p.len(), |i| at + i)
            .min(stop);
        let w = &p[at..end];
        match word(w) {
            None if !done && (open == 0 || space) => {
                open += 1;
                space = false;
            }
            pattern => {
                close(&mut re, &mut open, &mut space, &mut done);
                re.push_str(&pattern.unwrap_or_else(|| regex::escape(w)));
            }
        }
        at = end;
    }
    close(&mut re, &mut open, &mut space, &mut done);
    if !re.ends_with(' ') {
        re.push(' ');
    }
    re
}

/// The engine group of `n` words separated by single spaces.
fn engine_words(n: usize) -> String {
    let more = if n > 1 {
        format!("(?: [^ \\[\\]]+){{{}}}", n - 1)
    } else {
        String::new()
    };
    format!("(?P<engine>[^ \\[\\]]+{more})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;

    fn read_of(before: &str) -> (Read, String) {
        let pat = Patterns::embedded().unwrap();
        let mut id = String::new();
        (read(&pat.rank_tags, before, &mut id), id)
    }

    #[test]
    fn a_forks_bracket_gives_time_ranks_and_identity() {
        let (r, id) = read_of("[2025-12-10 14:02:13.102 GPU=0 Worker 0 (model_1) TP=0] ");
        let Read::Prefix { time, ranks, .. } = r else {
            panic!("{r:?}");
        };
        assert_eq!(id, "Worker 0 (model_1)");
        assert_eq!(ranks.tp, Some(0));
        let t = time.unwrap();
        assert_eq!(t.date.unwrap().to_string(), "2025-12-10");
        assert_eq!(t.time.to_string(), "14:02:13.102");
        // SGLang's spelling of the tag, a DP tag with a colon, a level among the words.
        let (r, id) = read_of("[14:02:13 INFO model_2 DP:1 TP3] ");
        assert_eq!(id, "model_2");
        let Read::Prefix { ranks, time, .. } = r else {
            panic!("{r:?}");
        };
        assert_eq!((ranks.dp, ranks.tp), (Some(1), Some(3)));
        assert_eq!(time.unwrap().date, None);
    }

    #[test]
    fn malformed_times_and_ranks_refuse_the_line_and_non_prefixes_are_nothing() {
        assert_eq!(read_of("[2026-0٦-03 10:00:00 TP0] ").0, Read::Refused);
        assert_eq!(read_of("[2026-06-03 25:00:00 w TP0] ").0, Read::Refused);
        assert_eq!(read_of("[w TP=99999999999] ").0, Read::Refused);
        assert_eq!(read_of("[w TP=1 TP=2] ").0, Read::Refused);
        assert_eq!(read_of("").0, Read::Nothing);
        assert_eq!(read_of("warning: ").0, Read::Nothing);
        assert_eq!(read_of("echo \"[x] ").0, Read::Nothing);
        // SGLang's own v0.1.17-v0.2.13 tag: the parser's `gpu_id` rule reads it.
        assert_eq!(read_of("[gpu_id=0] ").0, Read::Nothing);
        // A vLLM-style month and day, a level and the source location name no writer.
        let (r, id) = read_of("INFO 12-10 14:02:13 [scheduler.py:1234] [w1 TP1] ");
        assert_eq!(id, "w1");
        assert!(
            matches!(r, Read::Prefix { time: Some(t), ranks, .. } if t.date.is_none() && ranks.tp == Some(1)),
            "{r:?}"
        );
        // A Unix or zoned time is not read as local time, and not part of the identity.
        let (r, id) = read_of("[1790416801.000 w1 TP=1] ");
        assert_eq!(id, "w1");
        assert!(matches!(r, Read::Prefix { time: None, .. }), "{r:?}");
    }

    /// A zone after a space (`+0100`, `UTC`, `CET`) was read as local time (an hour off under
    /// `--timezone UTC`) and became the writer's name (`engine="+0100"`): now the time is left
    /// unread, as an attached zone's is, and the zone is no writer, so one model stays one engine.
    #[test]
    fn a_zone_after_a_space_is_neither_local_time_nor_a_writer() {
        for p in [
            "[2025-12-10 14:02:11.001 +0100 TP0] ",
            "[2025-12-10 14:02:11.001+01:00 TP0] ",
            "[2025-12-10 14:02:11.001 -05:30 TP0] ",
            "[2025-12-10 14:02:11.001 UTC TP0] ",
            "[2025-12-10 14:02:12.001 CET TP0] ",
            "[14:02:12 PST TP0] ",
        ] {
            let (r, id) = read_of(p);
            assert_eq!(id, "", "{p}");
            assert!(
                matches!(r, Read::Prefix { time: None, ranks, .. } if ranks.tp == Some(0)),
                "{p}: {r:?}"
            );
        }
        // A writer's word of capitals is not a zone.
        let (r, id) = read_of("[2025-12-10 14:02:11 GPT TP0] ");
        assert_eq!(id, "GPT");
        assert!(matches!(r, Read::Prefix { time: Some(_), .. }), "{r:?}");
    }

    /// `check`'s entry for a spaced offset reads the time exactly (its `ts` group, by
    /// `stream::unix_time`); for a zone's name it matches the time and leaves it unread.
    #[test]
    fn checks_entry_for_a_spaced_zone_reads_the_time_exactly_or_not_at_all() {
        let pat = Patterns::embedded().unwrap();
        let p = "[2025-12-10 14:02:11.001 +0100 TP0] ";
        let e = entry(&pat.rank_tags, p);
        let re = Regex::new(&format!("^(?:{e})")).unwrap();
        let c = re.captures(p).unwrap();
        assert_eq!(&c["ts"], "2025-12-10 14:02:11.001 +0100");
        assert_eq!(&c["tp"], "0");
        assert_eq!(c.get(0).unwrap().end(), p.len());
        let t = crate::parse::stream::unix_time(&c["ts"]).unwrap();
        assert!((t - 1765371731.001).abs() < 1e-6, "{t}");
        let p = "[2025-12-10 14:02:12.001 CET TP0] ";
        let e = entry(&pat.rank_tags, p);
        let re = Regex::new(&format!("^(?:{e})")).unwrap();
        let c = re.captures(p).unwrap();
        assert!(c.name("ts").is_none() && c.name("time").is_none(), "{e}");
        assert!(c.name("engine").is_none(), "{e}");
        assert_eq!(c.get(0).unwrap().end(), p.len());
    }

    /// The closing trial's per-line tokens (a sequence number, a counter, a PID, glog's thread
    /// id, a request counter) made a new engine per line, up to the 64-engine cap: none of
    /// them is part of the identity now, and a writer's name with its number still is.
    #[test]
    fn per_line_tokens_are_no_part_of_the_identity() {
        for (p, id, tp) in [
            ("[2025-12-10 14:02:13 seq=41 TP0] ", "", Some(0)),
            ("[2025-12-10 14:02:13 #41 TP0] ", "", Some(0)),
            ("[2025-12-10 14:02:13 pid=4242 TP0] ", "", Some(0)),
            (
                "[2025-12-10 14:02:13 host-a pid:4242 req#17 TP1] ",
                "host-a",
                Some(1),
            ),
            (
                "[2025-12-10 14:02:13 node-1 tid=139 rid=9f3a2c TP0] ",
                "node-1",
                Some(0),
            ),
            (
                "[2025-12-10 14:02:13 req 17 seq5 (pid=4242) TP0] ",
                "",
                Some(0),
            ),
            ("[2025-12-10 14:02:13 12.345 5ms 3/10 TP0] ", "", Some(0)),
            ("I1210 14:02:13.123456 12345 scheduler.py:10] ", "", None),
            (
                "[2025-12-10 14:02:13 Worker 0 (model_1) 98765 TP0] ",
                "Worker 0 (model_1)",
                Some(0),
            ),
            (
                "[2025-12-10 14:02:13 replica=2 n=7 TP0] ",
                "replica=2",
                Some(0),
            ),
        ] {
            let (r, got) = read_of(p);
            assert_eq!(got, id, "{p}");
            assert!(
                matches!(r, Read::Prefix { time: Some(_), ranks, .. } if ranks.tp == tp),
                "{p}: {r:?}"
            );
        }
        // A number too long for any writer's name after a writer's word: refused.
        let long = format!("[14:02:13 Worker {} TP0] ", "7".repeat(21));
        assert_eq!(read_of(&long).0, Read::Refused);
    }

    /// glog's `I1210 14:02:13.123456` (level, month, day) and vLLM's `12-10 14:02:13` keep
    /// their month and day for the resolver to give a year; a day no year has is refused.
    #[test]
    fn a_month_and_day_without_year_are_read() {
        for p in [
            "I1210 14:02:13.123456 12345 scheduler.py:10] ",
            "W1210 14:02:13.123456 12345 scheduler.py:10] ",
            "INFO 12-10 14:02:13 [scheduler.py:1234] ",
        ] {
            let (r, id) = read_of(p);
            assert_eq!(id, "", "{p}");
            let Read::Prefix { time: Some(t), .. } = r else {
                panic!("{p}: {r:?}");
            };
            assert_eq!((t.date, t.month_day), (None, Some((12, 10))), "{p}");
            assert_eq!(t.time.hour(), 14, "{p}");
        }
        assert_eq!(read_of("I1332 14:02:13.123456 1 x.py:1] ").0, Read::Refused);
        assert_eq!(read_of("I0230 14:02:13.123456 1 x.py:1] ").0, Read::Refused);
    }

    /// Lowercase and spaced rank tags became engines (`engine="tp=0"`): they are ranks, in
    /// every spelling a prefix uses, and a rank-shaped word with no valid number refuses the
    /// line rather than name a writer.
    #[test]
    fn rank_tags_in_every_spelling_are_ranks() {
        for (p, dp, tp) in [
            ("[w1 tp=0] ", None, Some(0)),
            ("[w1 TP 1] ", None, Some(1)),
            ("[w1 tp_rank=2] ", None, Some(2)),
            ("[w1 tp-rank:3] ", None, Some(3)),
            ("[w1 dp=1 tp=4] ", Some(1), Some(4)),
            ("[w1 DP 1 TP 5] ", Some(1), Some(5)),
            ("[w1 dp_rank 1 Tp:6] ", Some(1), Some(6)),
            ("[w1 DP0 TP7] ", Some(0), Some(7)),
        ] {
            let (r, id) = read_of(p);
            assert_eq!(id, "w1", "{p}");
            assert!(
                matches!(r, Read::Prefix { ranks, .. } if ranks.dp == dp && ranks.tp == tp),
                "{p}: {r:?}"
            );
        }
        for p in [
            "[w1 tp=x] ",
            "[w1 TP] ",
            "[w1 TP x] ",
            "[w1 tp_rank=-1] ",
            "[w1 TP٣] ",
            "[w1 tp=1 TP 2] ",
            "[w1 GPU=0 gpu_id=1 TP0] ",
        ] {
            assert_eq!(read_of(p).0, Read::Refused, "{p}");
        }
        // `GPU 3` and `cuda:3` name a GPU, no writer and no rank.
        let (r, id) = read_of("[w1 GPU 3 TP0] ");
        assert_eq!(id, "w1");
        assert!(matches!(r, Read::Prefix { gpu: Some(3), .. }), "{r:?}");
    }

    /// A bracket of digits became an engine at 100 to 200 digits and not at 300: a run of
    /// digits is no writer's name at any length, and a prefix too long to read is refused,
    /// never passed over (its `TP1` would be lost).
    #[test]
    fn a_run_of_digits_is_never_a_writer() {
        for n in [1, 10, 16, 50, 99, 100, 150, 200, 240] {
            let p = format!("[{} TP1] ", "7".repeat(n));
            let (r, id) = read_of(&p);
            assert_eq!(id, "", "{n} digits");
            assert!(
                matches!(r, Read::Prefix { ranks, .. } if ranks.tp == Some(1)),
                "{n} digits: {r:?}"
            );
        }
        for n in [300, 1000] {
            let p = format!("[{} TP1] ", "7".repeat(n));
            assert_eq!(read_of(&p), (Read::Refused, String::new()), "{n} digits");
        }
    }

    #[test]
    fn check_suggests_an_entry_that_reads_the_prefix_exactly() {
        let pat = Patterns::embedded().unwrap();
        let p = "[2025-12-10 14:02:13.102 GPU=0 Worker 0 (model_1) TP=0] ";
        let e = entry(&pat.rank_tags, p);
        assert_eq!(
            e,
            r"\[(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9]) (?P<time>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])[.,](?P<frac>[0-9]{1,9}) GPU=[0-9]+ (?P<engine>[^ \[\]]+(?: [^ \[\]]+){2}) TP=(?P<tp>[0-9]+)\] "
        );
        let re = Regex::new(&format!("^(?:{e})")).unwrap();
        let c = re.captures(p).unwrap();
        assert_eq!(&c["engine"], "Worker 0 (model_1)");
        assert_eq!(&c["tp"], "0");
        assert_eq!(c.get(0).unwrap().end(), p.len());
    }
}
