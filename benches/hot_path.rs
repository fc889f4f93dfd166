//! The hot path, one line at a time: `Parser::parse` on a decode, a prefill, an access and a
//! non-matching line, the journald JSON unwrap plus parse, and a whole `Ingest::line` (parse,
//! stamp, state update) on those and on a stats line wrapped by `journalctl -o short`, a CRI
//! runtime's file and `kubectl logs --prefix`, and on a `Finish:` request line that no kind
//! reads without `--log-requests` parsing. `request` runs `Ingest::line` on `--log-requests` Finish records: the
//! sample ones (text and JSON, a few KiB) and level-3 lines of 1, 4 and 8 MiB, whose time per
//! byte must stay flat (one pass, no allocation growing with the line). divan prints time per line, lines/s and bytes/s, and — through its
//! counting allocator — allocations per line (the aim: none for a line that matches nothing).
//!
//! Run: `cargo bench --bench hot_path` (add `-- decode` to filter).

use std::sync::Arc;

use divan::counter::{BytesCount, ItemsCount};
use divan::{black_box, Bencher};
use sglang_log_exporter::parse::patterns::Patterns;
use sglang_log_exporter::parse::prefix::TimeResolver;
use sglang_log_exporter::parse::Parser;
use sglang_log_exporter::pipeline::framing::Framer;
use sglang_log_exporter::pipeline::{Ingest, Pipeline};
use sglang_log_exporter::state::{State, StateConfig};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

const DECODE: &str = "[2026-06-03 10:01:50 DP0 TP0] Decode batch, #running-req: 1, #token: 8156, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 42.27, #queue-req: 0";
const PREFILL: &str = "[2026-06-03 09:59:42 TP0] Prefill batch, #new-seq: 1, #new-token: 4, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, #bootstrap-req: 0, #inflight-req: 0, cuda graph: False, input throughput (token/s): 0.00";
const ACCESS: &str =
    "[2026-06-03 10:00:26] INFO:     127.0.0.1:44941 - \"POST /generate HTTP/1.1\" 200 OK";
const NOMATCH: &str =
    "[2026-06-03 09:57:58 DP1 TP1] Init torch distributed ends. elapsed=4.58 s, mem usage=1.19 GB";
/// The decode line as `journalctl -o short` prints it (host, unit, pid).
const JOURNAL_SHORT: &str = "Jun 03 10:01:50 gpu-node-1 python3[48213]: [2026-06-03 10:01:50 DP0 TP0] Decode batch, #running-req: 1, #token: 8156, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 42.27, #queue-req: 0";
/// The decode line in a CRI runtime's container log file (`/var/log/pods/...`).
const CRI: &str = "2026-06-03T10:01:50.123456789Z stderr F [2026-06-03 10:01:50 DP0 TP0] Decode batch, #running-req: 1, #token: 8156, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 42.27, #queue-req: 0";
/// The decode line as `kubectl logs --prefix` prints it.
const KUBECTL: &str = "[pod/sglang-decode-0/sglang] [2026-06-03 10:01:50 DP0 TP0] Decode batch, #running-req: 1, #token: 8156, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 42.27, #queue-req: 0";
/// A request line no kind reads into values, whose `': 12'` pieces look like stats fields to
/// the unread-line test until it reads the keys.
const FINISH_NOISE: &str = "[2026-06-03 10:01:50 DP0 TP0] Finish: obj=GenerateReqInput(rid='a31c9e07', text='Hello'), out={'meta_info': {'id': 'a31c9e07', 'finish_reason': {'type': 'length', 'length': 128}, 'prompt_tokens': 12, 'completion_tokens': 128}}";
const JOURNAL: &str = r#"{"__REALTIME_TIMESTAMP":"1780480910400276","_SYSTEMD_UNIT":"sglang-decode.service","MESSAGE":"[2026-06-03 10:01:50 DP0 TP0] Decode batch, #running-req: 1, #token: 8156, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 42.27, #queue-req: 0","PRIORITY":"6"}"#;

fn main() {
    divan::main();
}

fn parser() -> Parser {
    Parser::new(Arc::new(Patterns::embedded().expect("embedded patterns")))
}

fn parse_one(b: Bencher, line: &'static str) {
    let mut p = parser();
    b.counter(ItemsCount::new(1usize))
        .counter(BytesCount::of_str(line))
        .bench_local(|| black_box(p.parse(black_box(line)).is_some()));
}

/// `Parser::parse` alone.
mod parse {
    use super::*;

    #[divan::bench]
    fn decode(b: Bencher) {
        parse_one(b, DECODE);
    }

    #[divan::bench]
    fn prefill(b: Bencher) {
        parse_one(b, PREFILL);
    }

    #[divan::bench]
    fn access(b: Bencher) {
        parse_one(b, ACCESS);
    }

    #[divan::bench]
    fn no_match(b: Bencher) {
        parse_one(b, NOMATCH);
    }

    /// A `journalctl -o json` record: unwrap with `Framer`, then parse the MESSAGE.
    #[divan::bench]
    fn journal_json(b: Bencher) {
        let mut p = parser();
        let mut f = Framer::new(1 << 20);
        b.counter(ItemsCount::new(1usize))
            .counter(BytesCount::of_str(JOURNAL))
            .bench_local(|| {
                use sglang_log_exporter::pipeline::framing::Framed;
                match f.frame(black_box(JOURNAL.as_bytes())) {
                    Framed::Message(m) => {
                        let text = m.text;
                        let s = std::str::from_utf8(text).unwrap_or("");
                        black_box(p.parse(s).is_some())
                    }
                    _ => false,
                }
            });
    }
}

/// `Ingest::line`: parse, stamp with the log time, apply to the shared state (lock included).
mod ingest {
    use super::*;

    fn ingest_one(b: Bencher, line: &'static str) {
        let pat = Arc::new(Patterns::embedded().expect("embedded patterns"));
        let state = State::shared(pat.clone(), StateConfig::default());
        let mut ing = Ingest::new(
            Pipeline::new(Parser::new(pat), 1 << 20, None),
            state,
            "bench.log",
            "bench",
            TimeResolver::new(jiff::tz::TimeZone::UTC, None),
        );
        // The first line creates the server and rank entries; measure the steady state.
        ing.line(line.as_bytes());
        b.counter(ItemsCount::new(1usize))
            .counter(BytesCount::of_str(line))
            .bench_local(|| ing.line(black_box(line.as_bytes())));
    }

    #[divan::bench]
    fn decode(b: Bencher) {
        ingest_one(b, DECODE);
    }

    #[divan::bench]
    fn prefill(b: Bencher) {
        ingest_one(b, PREFILL);
    }

    #[divan::bench]
    fn access(b: Bencher) {
        ingest_one(b, ACCESS);
    }

    #[divan::bench]
    fn no_match(b: Bencher) {
        ingest_one(b, NOMATCH);
    }

    #[divan::bench]
    fn journal_json(b: Bencher) {
        ingest_one(b, JOURNAL);
    }

    #[divan::bench]
    fn journal_short(b: Bencher) {
        ingest_one(b, JOURNAL_SHORT);
    }

    #[divan::bench]
    fn cri(b: Bencher) {
        ingest_one(b, CRI);
    }

    #[divan::bench]
    fn kubectl_prefix(b: Bencher) {
        ingest_one(b, KUBECTL);
    }

    #[divan::bench]
    fn finish_no_values(b: Bencher) {
        ingest_one(b, FINISH_NOISE);
    }
}

/// `--log-requests` Finish records through `Ingest::line` (line limit 16 MiB).
mod request {
    use super::*;

    const TEXT_LOG: &str = include_str!("../tests/data/request-logs/v0.5.23-text.log");
    const JSON_LOG: &str = include_str!("../tests/data/request-logs/v0.5.23-json.log");

    fn ingest(b: Bencher, line: &str) {
        let pat = Arc::new(Patterns::embedded().expect("embedded patterns"));
        let state = State::shared(pat.clone(), StateConfig::default());
        let mut ing = Ingest::new(
            Pipeline::new(Parser::new(pat), 16 << 20, None),
            state,
            "bench.log",
            "bench",
            TimeResolver::new(jiff::tz::TimeZone::UTC, None),
        );
        ing.line(line.as_bytes());
        b.counter(ItemsCount::new(1usize))
            .counter(BytesCount::of_str(line))
            .bench_local(|| ing.line(black_box(line.as_bytes())));
    }

    /// The longest Finish record of a sample log (the trap texts, a truncated output list).
    fn longest(log: &str, marker: &str) -> String {
        log.lines()
            .filter(|l| l.contains(marker))
            .max_by_key(|l| l.len())
            .expect("a Finish record")
            .to_string()
    }

    #[divan::bench]
    fn finish_text(b: Bencher) {
        ingest(b, &longest(TEXT_LOG, "] Finish: obj="));
    }

    #[divan::bench]
    fn finish_json(b: Bencher) {
        ingest(b, &longest(JSON_LOG, "\"event\": \"request.finished\""));
    }

    /// A level-3 Finish record of `mib` MiB: untruncated prompt and output (quotes, escapes and
    /// brackets throughout) and output ids.
    fn level3(mib: usize) -> String {
        let text = "It\\'s {a} [b] (c), \"q\" \\n ".repeat(mib * 19_000);
        let ids: Vec<String> = (0..mib * 50_000)
            .map(|i| (i % 150_000).to_string())
            .collect();
        format!(
            "[2026-11-05 14:00:00] Finish: obj=GenerateReqInput(text='{text}', stream=True), out={{'text': '{text}', 'output_ids': [{}], 'meta_info': {{'prompt_tokens': 8, 'completion_tokens': 3, 'e2e_latency': 0.5}}}}",
            ids.join(", ")
        )
    }

    #[divan::bench(args = [1, 4, 8], sample_count = 20, sample_size = 1)]
    fn finish_level3_mib(b: Bencher, mib: usize) {
        ingest(b, &level3(mib));
    }
}
