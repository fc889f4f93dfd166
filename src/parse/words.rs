//! What one word of a foreign prefix (src/parse/foreign.rs) says: a rank, a GPU, a writer's
//! name, or nothing of who wrote the line.
//!
//! The writer's identity (its `engine` label) is built only from words that name a writer: a
//! host, pod, container or unit name, a model, `Worker 0`, `replica=2`. Words that change from
//! line to line or from thread to thread never take part, whatever their length: a run of
//! digits standing alone (glog's thread id, `[123…]`), a number with a fraction or a unit
//! (`12.345`, `5ms`), a counter (`#17`, `req#17`), and any `KEY=VALUE` whose key counts lines,
//! requests, processes or threads (`seq=5`, `pid=4242`, `tid=7`, `rid=ab12`) or whose value is
//! a number under a key that names no writer (`n=3`). A number joins the identity only after a
//! writer's word (`Worker 0`, `node 3`, `replica=2`): there it tells two writers apart.
//!
//! Rank tags are read in the spellings a prefix uses: SGLang's own (`TP0`, `DP0 TP0`, `PP0`,
//! `EP0`: `configure_logger` in `python/sglang/srt/utils.py`), with `=` or `:`, in any case
//! (`tp=0`, `DP:1`), with a space (`TP 0`), and as a shipper's key (`tp_rank=1`, `dp_rank 1`,
//! `moe_ep_rank=0`). A word of that shape whose number is missing or not ASCII digits
//! (`tp=x`, `TP٣`, `TP` before no number) is a malformed rank: the line is refused, never
//! read with the word as a writer's name.

use crate::record::RankTag;

/// The most digits of a number that is part of a writer's name (`Worker 12`): more is no
/// name any writer prints (a garbled or hostile prefix), and the line is refused.
pub const MAX_NAME_NUMBER: usize = 20;

/// What a word says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word<'w> {
    /// Nothing of who wrote the line (a level, a separator, a source location, a counter, a
    /// thread id, a time).
    Skip,
    /// A rank tag and its number (ASCII digits); `None`: the number is the next word (`TP 0`).
    Rank(RankTag, Option<&'w str>),
    /// A GPU (`GPU=0`, `gpu_id:1`, `GPU3`, `cuda:0`) and its number; `None`: the next word.
    Gpu(Option<&'w str>),
    /// A run of ASCII digits: part of a name right after a writer's word, else nothing.
    Number,
    /// A word of the writer's name; `numbered`: a number after it is part of the name.
    Name {
        /// A word like `Worker`, `node`, `replica`: `Worker 0` and `Worker 1` are two.
        numbered: bool,
    },
    /// A rank or GPU tag with a malformed number: the line is refused.
    Bad,
}

/// Keys (and bare words) whose values count lines, requests, processes, threads or time, or
/// say where in the code the line was printed: never a writer's name.
#[rustfmt::skip]
const PER_LINE: &[&str] = &[
    "seq", "seqno", "seq_no", "sequence", "n", "no", "nr", "num", "line", "lineno", "line_no",
    "offset", "pid", "ppid", "tid", "lwp", "thread", "thread_id", "threadid", "threadname",
    "req", "request", "request_id", "req_id", "requestid", "rid", "id", "msg_id", "msgid",
    "message_id", "trace", "trace_id", "traceid", "span", "span_id", "spanid", "uuid", "count",
    "counter", "cnt", "idx", "index", "iter", "iteration", "step", "batch", "time", "ts",
    "timestamp", "t", "elapsed", "uptime", "duration", "dur", "latency", "took", "level",
    "lvl", "severity", "prio", "priority", "logger", "module", "func", "function", "funcname",
    "file", "filename", "caller", "process", "processname",
];

/// Words (and keys) that name a writer, after which a number is part of the name (`Worker 0`,
/// `replica=2`, `node_rank=1`).
#[rustfmt::skip]
const WRITER: &[&str] = &[
    "worker", "replica", "node", "rank", "instance", "inst", "shard", "engine", "server",
    "model", "host", "hostname", "pod", "container", "unit", "job", "task", "service", "app",
    "name", "local_rank", "global_rank", "node_rank", "port", "ip", "addr", "group", "slot",
    "partition", "cluster", "namespace", "role",
];

/// Whether `k` is one of `list`, in any case.
fn listed(list: &[&str], k: &str) -> bool {
    list.iter().any(|l| l.eq_ignore_ascii_case(k))
}

/// Whether `k` names a writer: a [`WRITER`] word, maybe with `_id`, `_idx`, `_index`,
/// `_name` after it (`worker_id`, `replica_idx`).
fn writer_key(k: &str) -> bool {
    listed(WRITER, k)
        || ["_id", "-id", "_idx", "_index", "_name"]
            .iter()
            .filter_map(|s| strip_ci(k, s))
            .any(|stem| listed(WRITER, stem))
}

/// `s` without the suffix `suffix` (any case).
fn strip_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    (s.is_char_boundary(cut) && s[cut..].eq_ignore_ascii_case(suffix)).then(|| &s[..cut])
}

/// `s` without the prefix `prefix` (any case).
fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let n = prefix.len();
    (s.len() >= n && s.is_char_boundary(n) && s[..n].eq_ignore_ascii_case(prefix)).then(|| &s[n..])
}

/// Whether `s` is a run of ASCII digits.
pub fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// Whether `s` is an IPv4 address, maybe with a port (`10.0.0.11`, `10.0.0.11:5000`): a host.
fn ipv4(s: &str) -> bool {
    let addr = match s.rsplit_once(':') {
        Some((a, port)) if digits(port) => a,
        _ => s,
    };
    let mut n = 0;
    addr.split('.').all(|p| {
        n += 1;
        digits(p) && p.len() <= 3
    }) && n == 4
}

/// Whether `k` is a key of an identifier other than a writer's (`x_request_id`, `session-id`,
/// `traceId`, `requestID`): such ids are minted per request or per line, so their values
/// would make each line an engine of its own. A writer's id (`worker_id`) is a
/// [`writer_key`], checked first.
fn id_key(k: &str) -> bool {
    let n = k.len();
    n > 2
        && k.is_char_boundary(n - 2)
        && (matches!(&k[n - 2..], "Id" | "ID")
            || (k[n - 2..].eq_ignore_ascii_case("id") && k[..n - 2].ends_with(['_', '-', '.'])))
}

/// Whether `s` is an opaque identifier minted per request or per line: a UUID
/// (`3fa85f64-5717-4562-b3fc-2c963f66afa6`), or a run of 16 hex digits or more with a digit
/// in it (a trace or span id), maybe after a word and `-` or `_` (`req-<uuid>`). A shorter
/// hex run (a container's 12) may name a writer, and is left to be one.
fn opaque_id(s: &str) -> bool {
    fn hex_run(s: &str) -> bool {
        s.len() >= 16
            && s.bytes().all(|c| c.is_ascii_hexdigit())
            && s.bytes().any(|c| c.is_ascii_digit())
    }
    fn uuid(s: &str) -> bool {
        let mut lens = [8usize, 4, 4, 4, 12].into_iter();
        s.split('-')
            .all(|p| lens.next() == Some(p.len()) && p.bytes().all(|c| c.is_ascii_hexdigit()))
            && lens.next().is_none()
    }
    let id = |s: &str| uuid(s) || hex_run(s);
    id(s)
        || s.split_once(['-', '_']).is_some_and(|(word, rest)| {
            !word.is_empty() && word.bytes().all(|c| c.is_ascii_alphabetic()) && id(rest)
        })
}

/// Whether `s` is a number, a time or a date of another shape than the time regex reads
/// (`12.345`, `+0.5`, `3/10`, `2025/12/10`, `00:12`, `12.5ms`, `1,234`): ASCII digits and
/// `. : / , _ + -` only, maybe a unit of time after; an IPv4 address is a host, not this.
fn numeric(s: &str) -> bool {
    let body = ["ms", "us", "µs", "ns", "s"]
        .iter()
        .find_map(|u| {
            s.strip_suffix(u)
                .filter(|b| b.ends_with(|c: char| c.is_ascii_digit()))
        })
        .unwrap_or(s);
    body.bytes().any(|c| c.is_ascii_digit())
        && body
            .bytes()
            .all(|c| c.is_ascii_digit() || b".:/,_+-".contains(&c))
        && !ipv4(body)
}

/// What the word `w` says (`tags`: the pattern file's `rank_tags`, longest first). `w` is one
/// word of the prefix, split at spaces and brackets; commas, semicolons and parentheses around
/// it are not part of what it says.
pub fn classify<'w>(tags: &[(String, RankTag)], w: &'w str) -> Word<'w> {
    let bare = w.trim_matches(|c| matches!(c, '(' | ')' | ',' | ';'));
    if bare.is_empty() || source_location(bare) || super::stream::names_no_writer(bare) {
        return Word::Skip;
    }
    if let Some(r) = rank(tags, bare) {
        return r;
    }
    if let Some(g) = gpu(bare) {
        return g;
    }
    if digits(bare) {
        return Word::Number;
    }
    if numeric(bare) {
        return Word::Skip;
    }
    // A counter: `#17`, `req#17`.
    if bare
        .split_once('#')
        .is_some_and(|(_, n)| n.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Word::Skip;
    }
    let kv = bare.split_once('=').or_else(|| {
        // `pid:42`, `worker:3`: a colon after a key of either list only (`host:5000` is a
        // host and its port).
        bare.split_once(':')
            .filter(|(k, _)| listed(PER_LINE, k) || writer_key(k))
    });
    if let Some((k, v)) = kv {
        if listed(PER_LINE, k) || v.is_empty() {
            // A per-line key, or a key whose value was the time (`ts=` before it).
            return Word::Skip;
        }
        if !writer_key(k) && (id_key(k) || opaque_id(v)) {
            // A request's, a trace's or a session's id: new at every request.
            return Word::Skip;
        }
        if digits(v) || numeric(v) {
            return match writer_key(k) {
                true => Word::Name { numbered: false },
                false => Word::Skip,
            };
        }
        return Word::Name { numbered: false };
    }
    // A per-line key alone (`pid 4242`) or with its number attached (`seq5`, `tid12`).
    let stem = bare.trim_end_matches(|c: char| c.is_ascii_digit());
    if listed(PER_LINE, stem) || opaque_id(bare) {
        return Word::Skip;
    }
    Word::Name {
        numbered: writer_key(bare),
    }
}

/// `bare` as a rank tag in any spelling (see the module docs); `None` when it is none.
fn rank<'w>(tags: &[(String, RankTag)], bare: &'w str) -> Option<Word<'w>> {
    for (name, which) in tags {
        let Some(rest) = strip_prefix_ci(bare, name) else {
            continue;
        };
        let (keyed, rest) =
            match strip_prefix_ci(rest, "_rank").or_else(|| strip_prefix_ci(rest, "-rank")) {
                Some(r) => (true, r),
                None => (false, rest),
            };
        let (sep, num) = match rest.strip_prefix(['=', ':']) {
            Some(n) => (true, n),
            None => (false, rest),
        };
        if num.is_empty() {
            return Some(Word::Rank(*which, None));
        }
        // `TP-0`, `TP_0`: a separator only before digits (`dp-worker` is a name).
        let num = match num.strip_prefix(['-', '_']) {
            Some(n) if !sep && digits(n) => n,
            _ => num,
        };
        if digits(num) {
            return Some(Word::Rank(*which, Some(num)));
        }
        // `tp=x`, `tp_rank=-1`, `TP٣`, `TP0a`: a rank's shape, no rank's number.
        if sep || keyed || num.starts_with(char::is_numeric) {
            return Some(Word::Bad);
        }
        // `TPU`, `EPYC`, `dp-worker`: another word; a shorter tag may still match (none do).
    }
    None
}

/// `bare` as a GPU tag (`GPU=0`, `gpu_id:1`, `GPU3`, `GPU 3`, `cuda:0`); `None` when it is none.
fn gpu(bare: &str) -> Option<Word<'_>> {
    let (rest, bare_ok) = match strip_prefix_ci(bare, "gpu") {
        Some(r) => (
            strip_prefix_ci(r, "_id")
                .or_else(|| strip_prefix_ci(r, "-id"))
                .unwrap_or(r),
            true,
        ),
        // `cuda:0` (torch's device name) only with its colon: `cuda12` is a toolkit.
        None => (strip_prefix_ci(bare, "cuda:")?, false),
    };
    let (sep, num) = match rest.strip_prefix(['=', ':']) {
        Some(n) => (true, n),
        None => (!bare_ok, rest),
    };
    if num.is_empty() {
        return (bare_ok || sep).then_some(Word::Gpu(None));
    }
    if digits(num) {
        return Some(Word::Gpu(Some(num)));
    }
    (sep || num.starts_with(char::is_numeric)).then_some(Word::Bad)
}

/// Whether `w` is a source location (`scheduler.py:1234`, `scheduler.py`): which code printed
/// the line (a prefill and a decode line of one rank differ), not who.
pub(super) fn source_location(w: &str) -> bool {
    let file = match w.rsplit_once(':') {
        Some((f, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => f,
        _ => w,
    };
    file.len() > 3 && file.ends_with(".py")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;

    #[test]
    fn every_word_says_what_it_is() {
        let tags = Patterns::embedded().unwrap().rank_tags;
        let c = |w| classify(&tags, w);
        let name = Word::Name { numbered: false };
        for (w, want) in [
            ("TP0", Word::Rank(RankTag::Tp, Some("0"))),
            ("tp=0", Word::Rank(RankTag::Tp, Some("0"))),
            ("TP", Word::Rank(RankTag::Tp, None)),
            ("tp_rank=1", Word::Rank(RankTag::Tp, Some("1"))),
            ("DP:1", Word::Rank(RankTag::Dp, Some("1"))),
            ("dp_rank", Word::Rank(RankTag::Dp, None)),
            ("moe_dp=2", Word::Rank(RankTag::MoeDp, Some("2"))),
            ("PP0", Word::Rank(RankTag::Pp, Some("0"))),
            ("EP3", Word::Rank(RankTag::Ep, Some("3"))),
            ("tp=x", Word::Bad),
            ("tp_rank=-1", Word::Bad),
            ("TP٣", Word::Bad),
            ("TPU", name),
            ("TP-1", Word::Rank(RankTag::Tp, Some("1"))),
            ("dp-worker", name),
            ("epoch=3", Word::Skip),
            ("ppid=5", Word::Skip),
            ("GPU=4", Word::Gpu(Some("4"))),
            ("gpu_id:1", Word::Gpu(Some("1"))),
            ("GPU", Word::Gpu(None)),
            ("cuda:0", Word::Gpu(Some("0"))),
            ("gpu=x", Word::Bad),
            ("12345", Word::Number),
            ("12.345", Word::Skip),
            ("5ms", Word::Skip),
            ("3/10", Word::Skip),
            ("#17", Word::Skip),
            ("req#17", Word::Skip),
            ("seq=5", Word::Skip),
            ("pid=4242", Word::Skip),
            ("pid:4242", Word::Skip),
            ("(pid=4242)", Word::Skip),
            ("tid12", Word::Skip),
            ("pid", Word::Skip),
            ("rid=ab12", Word::Skip),
            ("n=3", Word::Skip),
            ("tp_size=8", Word::Skip),
            ("ts=", Word::Skip),
            ("replica=2", name),
            ("port=30001", name),
            ("worker_id=2", name),
            ("host=gpu-node-1", name),
            ("10.0.0.11", name),
            ("10.0.0.11:5000", name),
            ("(model_1)", name),
            ("sglang-0", name),
            ("Worker", Word::Name { numbered: true }),
            ("node", Word::Name { numbered: true }),
            ("port", Word::Name { numbered: true }),
            ("INFO", Word::Skip),
            ("scheduler.py:10", Word::Skip),
            ("3fa85f64-5717-4562-b3fc-2c963f66afa6", Word::Skip),
            ("req-3fa85f64-5717-4562-b3fc-2c963f66afa6", Word::Skip),
            ("4bf92f3577b34da6a3ce929d0e0e4736", Word::Skip),
            ("x_request_id=5f3a1c2e", Word::Skip),
            ("session-id=abc", Word::Skip),
            ("traceId=ab12", Word::Skip),
            ("requestID=ab12", Word::Skip),
            ("correlation_id=abc1x", Word::Skip),
            ("span=4bf92f3577b34da6", Word::Skip),
            ("session=4bf92f3577b34da6", Word::Skip),
            ("3f4e1a2b9c8d", name),
            ("deadbeefdeadbeef", name),
            ("sglang-7d9f8b6c5f-x2x4z", name),
            ("node_id=7", name),
            ("valid", name),
        ] {
            assert_eq!(c(w), want, "{w}");
        }
    }
}
