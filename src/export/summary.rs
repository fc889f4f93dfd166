//! A short human summary of the state for `--once` (written to stderr after the exposition):
//! per server and rank, the KV cache as the rank's last stats line left it, its running and
//! queued requests, and whether the rank is busy or idle at the end of the input.
//!
//! The exposition answers "how full is the KV cache now", which is 0 for a rank that went idle
//! before the log ended; this answers "how full was it when the rank last worked". It is computed
//! from the state alone, so it never disagrees with the metrics.

use std::fmt::Write as _;

use jiff::tz::TimeZone;

use crate::logging::escape_controls;
use crate::record::Ranks;
use crate::state::{RankState, State};

/// The summary of `state` at `now` (Unix seconds; the end of the input for `--once`), times
/// shown in `tz` (the zone of the log's own prefix times, so they read like its lines). One
/// header line, then per server one line and per rank one line; ends with a newline.
pub fn render(state: &State, now: f64, tz: &TimeZone) -> String {
    let pat = state.patterns();
    let id = |n: &str| pat.metric_by_id(n).map(|m| m as usize);
    let ids = Ids {
        running: id("num_running_reqs"),
        queued: id("num_queue_reqs"),
        pool: id("kv_pool_capacity_tokens"),
        max_total: id("max_total_num_tokens"),
    };
    let idle_after = state.config().idle_after;
    let end = Time::new(now, tz);
    let mut out = String::new();
    // A server restarted at the end of the input (its new run printed no scheduler line yet)
    // is shown too: the input had its lines, in an earlier run.
    let servers: Vec<_> = state
        .servers()
        .iter()
        .filter(|(_, s)| !s.ranks.is_empty() || s.runs.earlier_ranks > 0)
        .collect();
    if servers.is_empty() {
        out.push_str("No SGLang scheduler lines (stats, KV cache, retractions) in the input.\n");
        return out;
    }
    let _ = writeln!(out, "KV cache at the end of the input ({}):", end.full);
    for (key, srv) in servers {
        // Names from the input reach a terminal: written escaped (repro 27).
        let model = escape_controls(srv.model_name());
        let engine = srv.engine_type(&key.server).as_str();
        let name = if key.engine.is_empty() {
            escape_controls(&key.server).into_owned()
        } else {
            let (s, e) = (escape_controls(&key.server), escape_controls(&key.engine));
            format!("{s} [{e}]")
        };
        let restarts = restarts_text(&srv.runs, &end, tz);
        if model.is_empty() {
            let _ = writeln!(out, "  {name} ({engine}){restarts}");
        } else {
            let _ = writeln!(out, "  {name} ({engine}, {model}){restarts}");
        }
        if srv.ranks.is_empty() {
            let _ = writeln!(out, "    no scheduler lines since the restart");
        }
        for (ranks, rank) in &srv.ranks {
            // A capacity-line value (server scope) applies to every rank; a rank's own pool line
            // is more precise.
            let server_value = |i: Option<usize>| i.map(|i| srv.values[i]).filter(|v| !v.is_nan());
            let capacity = ids
                .pool
                .map(|i| rank.values[i])
                .filter(|v| !v.is_nan())
                .or_else(|| server_value(ids.max_total));
            // Each pool against its own capacity (see `crate::kv`).
            let read = |name: &str| {
                let i = pat.metric_by_id(name)? as usize;
                let v = rank.values[i];
                if v.is_nan() {
                    server_value(Some(i))
                } else {
                    Some(v)
                }
            };
            let kv = crate::kv::KvUse::of(&crate::kv::KvValues {
                capacity,
                ..crate::view::kv_values(&read)
            });
            let _ = writeln!(
                out,
                "    {}  {}",
                rank_name(ranks),
                rank_line(rank, ranks, &ids, &kv, capacity, now, idle_after, &end, tz)
            );
        }
    }
    out
}

/// What the summary says of a server's earlier runs (empty when it never restarted): when
/// its current run started and the stats lines before it, so that a restart never reads as
/// an input without scheduler lines.
fn restarts_text(runs: &crate::state::runs::Runs, end: &Time, tz: &TimeZone) -> String {
    if runs.restarts == 0 {
        return String::new();
    }
    let at = runs
        .restarted_at
        .map(|t| Time::new(t, tz).relative_to(end).to_string());
    let when = match (runs.restarts, at) {
        (1, Some(at)) => format!("restarted at {at}"),
        (1, None) => "restarted".to_string(),
        (n, Some(at)) => format!("restarted {n} times, last at {at}"),
        (n, None) => format!("restarted {n} times"),
    };
    let lines = runs.earlier_stats_lines;
    let s = if lines == 1 { "" } else { "s" };
    format!(": {when}; {lines} stats line{s} before")
}

/// Metric ids the summary reads (absent from a custom pattern file: left out of the text).
struct Ids {
    running: Option<usize>,
    queued: Option<usize>,
    pool: Option<usize>,
    max_total: Option<usize>,
}

/// A time shown in the log's zone: the full date and time, and the date alone.
struct Time {
    full: String,
    date: String,
    clock: String,
}

impl Time {
    fn new(unix: f64, tz: &TimeZone) -> Time {
        let ts = jiff::Timestamp::from_second(unix.floor() as i64).unwrap_or_default();
        let z = ts.to_zoned(tz.clone());
        Time {
            full: z.strftime("%Y-%m-%d %H:%M:%S").to_string(),
            date: z.strftime("%Y-%m-%d").to_string(),
            clock: z.strftime("%H:%M:%S").to_string(),
        }
    }

    /// The clock time alone on the day of `end`, else the full time.
    fn relative_to(&self, end: &Time) -> &str {
        if self.date == end.date {
            &self.clock
        } else {
            &self.full
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn rank_line(
    rank: &RankState,
    ranks: &Ranks,
    ids: &Ids,
    kv: &crate::kv::KvUse,
    capacity: Option<f64>,
    now: f64,
    idle_after: f64,
    end: &Time,
    tz: &TimeZone,
) -> String {
    let get = |i: Option<usize>| i.map(|i| rank.values[i]).filter(|v| !v.is_nan());
    let state = match rank.last_stats {
        // Stats lines without a time (SGLang before v0.2.14): their last values stand.
        None if rank.has_stats() => "last stats line (no time in the log):".to_string(),
        None => {
            let text = crate::view::no_stats_text(ranks.dp, ranks.tp);
            return match capacity {
                Some(c) => format!("{text}; KV pool {c:.0} tokens"),
                None => text.to_string(),
            };
        }
        Some(last) => {
            let at = Time::new(last, tz);
            let at = at.relative_to(end);
            if rank.is_idle(now, idle_after) {
                // What a scrape, the page and `top` show of an idle rank (its activity reads
                // 0, issue 38.6), then the last busy state this summary is for.
                let cap = capacity.map_or(String::new(), |c| format!(" (0/{c:.0} tokens)"));
                format!("idle since {at}: KV cache 0.0%{cap}, 0 running, 0 queued; last busy:")
            } else {
                format!("busy at {at}:")
            }
        }
    };
    let kv = format!("KV cache {}", kv.text());
    let mut parts = vec![kv];
    if let Some(r) = get(ids.running) {
        parts.push(format!("{r:.0} running"));
    }
    if let Some(q) = get(ids.queued) {
        parts.push(format!("{q:.0} queued"));
    }
    format!("{state} {}", parts.join(", "))
}

/// The rank as SGLang's prefix names it (`DP0 TP0`); `-` for a single scheduler without tags.
fn rank_name(r: &Ranks) -> String {
    let tags = [
        ("DP", r.dp),
        ("PP", r.pp),
        ("ATTN_CP", r.attn_cp),
        ("MOE_DP", r.moe_dp),
        ("TP", r.tp),
        ("EP", r.ep),
    ];
    let s: Vec<String> = tags
        .iter()
        .filter_map(|(t, v)| v.map(|n| format!("{t}{n}")))
        .collect();
    if s.is_empty() {
        "-".to_string()
    } else {
        s.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::parse::prefix::TimeResolver;
    use crate::parse::Parser;
    use crate::pipeline::Ingest;
    use crate::state::{lock, StateConfig};

    const LOG: &str = "\
[2026-06-03 09:59:29] server_args=ServerArgs(model_path='m/x', served_model_name='m/x', tp_size=2, dp_size=1, disaggregation_mode='decode')
[2026-06-03 09:59:29 TP0] KV Cache is allocated. #tokens: 100000, KV size: 5.00 GB
[2026-06-03 09:59:29 TP1] KV Cache is allocated. #tokens: 100000, KV size: 5.00 GB
[2026-06-03 09:59:30 TP2] KV Cache is allocated. #tokens: 100000, KV size: 5.00 GB
[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 12, #token: 45678, token usage: 0.46, cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 3
[2026-06-03 10:00:31 TP1] Decode batch, #running-req: 2, #token: 1234, token usage: 0.01, cuda graph: True, gen throughput (token/s): 80.00, #queue-req: 0
[2026-06-03 10:00:40] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK
";

    fn state_of(log: &str) -> crate::state::Shared {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(pat.clone(), StateConfig::default());
        let mut ing = Ingest::new(
            crate::pipeline::Pipeline::new(Parser::new(pat), 1 << 20, None),
            state.clone(),
            "t",
            "decode",
            TimeResolver::new(TimeZone::UTC, None),
        );
        for l in log.lines() {
            ing.line(l.as_bytes());
        }
        ing.flush();
        state
    }

    #[test]
    fn last_busy_state_per_rank_at_the_end_of_the_input() {
        let state = state_of(LOG);
        let s = lock(&state);
        // The log clock: the last timed line (the access line at 10:00:40); TP1's last stats
        // line is 9 s before it, within --idle-after.
        let now = s.log_clock().unwrap();
        assert_eq!(
            render(&s, now, &TimeZone::UTC),
            "\
KV cache at the end of the input (2026-06-03 10:00:40):
  decode (decode, m/x)
    TP0  idle since 10:00:00: KV cache 0.0% (0/100000 tokens), 0 running, 0 queued; last busy: KV cache 45.7% (45678/100000 tokens), 12 running, 3 queued
    TP1  busy at 10:00:31: KV cache 1.2% (1234/100000 tokens), 2 running, 0 queued
    TP2  no stats lines (only TP0 prints under plain TP); KV pool 100000 tokens
"
        );
    }

    /// After a restart in the input (a second `server_args`), the lines of the earlier run
    /// still count: a restart at the end (no scheduler line of the new run yet) is no input
    /// without scheduler lines, and a restart before the last run says so.
    #[test]
    fn the_lines_of_every_run_count() {
        let run = "\
[2026-06-03 10:00:00] server_args=ServerArgs(model_path='m/x', tp_size=1)
[2026-06-03 10:00:10] Decode batch, #running-req: 3, #token: 300, token usage: 0.30, gen throughput (token/s): 10.00, #queue-req: 0
[2026-06-03 10:00:20] Decode batch, #running-req: 4, #token: 400, token usage: 0.40, gen throughput (token/s): 10.00, #queue-req: 0
";
        let restart = "[2026-06-03 10:01:00] server_args=ServerArgs(model_path='m/y', tp_size=1)\n";
        let state = state_of(&format!("{run}{restart}"));
        let s = lock(&state);
        assert_eq!(
            render(&s, s.log_clock().unwrap(), &TimeZone::UTC),
            "\
KV cache at the end of the input (2026-06-03 10:01:00):
  decode (decode, m/y): restarted at 10:01:00; 2 stats lines before
    no scheduler lines since the restart
"
        );
        drop(s);
        let again = |t: &str| {
            format!("[2026-06-03 {t}] Decode batch, #running-req: 1, #token: 100, token usage: 0.10, gen throughput (token/s): 10.00, #queue-req: 0\n")
        };
        let log = format!(
            "{run}{}{}{restart}{}",
            restart.replace("10:01:00", "10:00:30"),
            again("10:00:40"),
            again("10:01:05")
        );
        let state = state_of(&log);
        let s = lock(&state);
        assert_eq!(
            render(&s, s.log_clock().unwrap(), &TimeZone::UTC),
            "\
KV cache at the end of the input (2026-06-03 10:01:05):
  decode (unified, m/y): restarted 2 times, last at 10:01:00; 3 stats lines before
    -  busy at 10:01:05: KV cache 10.0%, 1 running, 0 queued
"
        );
    }

    #[test]
    fn says_so_when_the_input_has_no_scheduler_lines() {
        let state = state_of("hello\n[2026-06-03 10:00:40] INFO: nothing\n");
        let s = lock(&state);
        assert_eq!(
            render(&s, 0.0, &TimeZone::UTC),
            "No SGLang scheduler lines (stats, KV cache, retractions) in the input.\n"
        );
    }
}
