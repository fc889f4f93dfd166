//! `State::apply` for each line class, on lines parsed by the embedded pattern file.

use super::*;
use crate::parse::patterns::Patterns;
use crate::parse::Parser;

const T: f64 = 1780480800.0;

struct Fixture {
    pat: Arc<Patterns>,
    parser: Parser,
    state: State,
}

impl Fixture {
    fn new(cfg: StateConfig) -> Fixture {
        let pat = Arc::new(Patterns::embedded().unwrap());
        Fixture {
            parser: Parser::new(pat.clone()),
            state: State::new(pat.clone(), cfg),
            pat,
        }
    }

    /// Parses `line` and applies it to server `srv` at `ts`.
    fn apply(&mut self, srv: &str, line: &str, ts: Option<f64>) {
        let rec = self
            .parser
            .parse(line)
            .unwrap_or_else(|| panic!("no record: {line}"));
        self.state.apply("src", srv, &rec, ts);
    }

    fn id(&self, name: &str) -> usize {
        self.pat
            .metric_by_id(name)
            .unwrap_or_else(|| panic!("no metric {name}")) as usize
    }

    fn server(&self, srv: &str) -> &ServerState {
        &self.state.servers()[&ServerKey::plain(srv)]
    }

    fn rank(&self, srv: &str, tp: Option<u32>) -> &RankState {
        &self.server(srv).ranks[&Ranks {
            tp,
            ..Ranks::default()
        }]
    }
}

fn tp(n: u32) -> Option<u32> {
    Some(n)
}

#[test]
fn a_decode_line_sets_its_ranks_gauges_and_stats_time() {
    let mut f = Fixture::new(StateConfig::default());
    f.apply(
        "d",
        "[2026-06-03 10:00:00 TP1] Decode batch, #running-req: 7, #token: 700, token usage: 0.07, cuda graph: True, gen throughput (token/s): 42.12, #queue-req: 3",
        Some(T),
    );
    let r = f.rank("d", tp(1));
    assert_eq!(r.values[f.id("num_running_reqs")], 7.0);
    assert_eq!(r.values[f.id("num_used_tokens")], 700.0);
    assert_eq!(r.values[f.id("token_usage")], 0.07);
    assert_eq!(r.values[f.id("num_queue_reqs")], 3.0);
    assert_eq!(r.values[f.id("gen_throughput")], 42.12);
    // Derived: the one pool's usage is the full pool's.
    assert_eq!(r.values[f.id("full_token_usage")], 0.07);
    assert_eq!((r.decode_lines, r.prefill_lines), (1, 0));
    assert_eq!(r.last_stats, Some(T));
    assert_eq!(f.state.log_clock(), Some(T));
    // The next line overwrites the gauges, counts again and moves the stats time.
    f.apply(
        "d",
        "[2026-06-03 10:00:05 TP1] Decode batch, #running-req: 2, #token: 200, token usage: 0.02, #queue-req: 0",
        Some(T + 5.0),
    );
    let r = f.rank("d", tp(1));
    assert_eq!(r.values[f.id("num_running_reqs")], 2.0);
    assert_eq!(r.values[f.id("num_queue_reqs")], 0.0);
    assert_eq!(r.decode_lines, 2);
    assert_eq!(r.last_stats, Some(T + 5.0));
    assert_eq!(f.server("d").ranks.len(), 1);
}

#[test]
fn a_prefill_line_counts_and_derives_the_cache_hit_rate() {
    let mut f = Fixture::new(StateConfig::default());
    f.apply(
        "p",
        "[2026-06-03 10:00:00 TP0] Prefill batch. #new-seq: 2, #new-token: 300, #cached-token: 100, token usage: 0.05, #running-req: 1, #queue-req: 4",
        Some(T),
    );
    let r = f.rank("p", tp(0));
    assert_eq!((r.decode_lines, r.prefill_lines), (0, 1));
    assert_eq!(r.last_stats, Some(T));
    assert_eq!(r.values[f.id("num_queue_reqs")], 4.0);
    assert_eq!(r.values[f.id("cache_hit_rate")], 0.25);
    // Counters of prefill tokens add up line by line.
    let new = f.id("prefill_new_tokens_total");
    assert_eq!(r.values[new], 300.0);
    f.apply(
        "p",
        "[2026-06-03 10:00:01 TP0] Prefill batch. #new-seq: 1, #new-token: 50, #cached-token: 0, token usage: 0.05, #running-req: 1, #queue-req: 0",
        Some(T + 1.0),
    );
    let r = f.rank("p", tp(0));
    assert_eq!(r.values[new], 350.0);
    assert_eq!(r.values[f.id("cache_hit_rate")], 0.0);
    assert_eq!(r.prefill_lines, 2);
}

#[test]
fn fact_lines_set_rank_and_server_values_but_no_stats_time() {
    let mut f = Fixture::new(StateConfig::default());
    f.apply(
        "d",
        "[2026-06-03 10:00:01 TP1] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB",
        Some(T),
    );
    f.apply(
        "d",
        "[2026-06-03 10:00:02 TP0] max_total_num_tokens=786432, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=256, context_len=163840",
        Some(T + 1.0),
    );
    let r1 = f.rank("d", tp(1));
    assert_eq!(r1.values[f.id("kv_pool_capacity_tokens")], 786432.0);
    assert_eq!(r1.last_stats, None);
    assert!(!r1.has_stats());
    // The capacity line is server scope: on the server, not on TP0's rank.
    let srv = f.server("d");
    let max = f.id("max_total_num_tokens");
    assert_eq!(srv.values[max], 786432.0);
    assert_eq!(srv.values[f.id("max_running_requests")], 256.0);
    assert!(f.rank("d", tp(0)).values[max].is_nan());
    // Facts move the log clock (they carry rank state).
    assert_eq!(f.state.log_clock(), Some(T + 1.0));
    assert!(f.state.fact_metrics[max]);
}

#[test]
fn a_retraction_line_counts_and_adds_to_its_counters() {
    let mut f = Fixture::new(StateConfig::default());
    for (i, n) in [3.0, 2.0].into_iter().enumerate() {
        f.apply(
            "d",
            &format!("[2026-06-03 10:00:0{i} TP0] KV cache pool is full. Retract requests. #retracted_reqs: {n}, #new_token_ratio: 0.0980 -> 0.3236"),
            Some(T + i as f64),
        );
    }
    let r = f.rank("d", tp(0));
    assert_eq!(r.retractions, 2);
    assert_eq!(r.last_retraction, Some(T + 1.0));
    assert_eq!(r.values[f.id("retracted_requests_total")], 5.0);
    // Not a stats line.
    assert_eq!(r.last_stats, None);
    assert_eq!((r.decode_lines, r.prefill_lines), (0, 0));
}

#[test]
fn access_lines_count_by_method_path_and_status_and_move_the_clock() {
    let mut f = Fixture::new(StateConfig::default());
    for l in [
        "[2026-06-03 10:00:24] INFO:     127.0.0.1:48238 - \"GET /get_model_info HTTP/1.1\" 200 OK",
        "[2026-06-03 10:00:26] INFO:     127.0.0.1:44941 - \"POST /generate HTTP/1.1\" 200 OK",
        "[2026-06-03 10:00:27] INFO:     127.0.0.1:44942 - \"POST /generate HTTP/1.1\" 200 OK",
    ] {
        f.apply("s", l, Some(T));
    }
    let srv = f.server("s");
    let got: Vec<_> = srv
        .http
        .iter()
        .map(|(k, v)| ((k.method(), k.path(), k.status), *v))
        .collect();
    assert_eq!(
        got,
        [
            (("GET", "/get_model_info", 200), 1),
            (("POST", "/generate", 200), 2)
        ]
    );
    assert!(srv.ranks.is_empty());
    // Every timed line moves the log's clock (a log that goes on with access lines reads idle
    // at its end, as followed live).
    assert_eq!(f.state.log_clock(), Some(T));
}

#[test]
fn server_args_set_the_model_and_engine_type() {
    let mut f = Fixture::new(StateConfig::default());
    f.apply(
        "x",
        "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='m', served_model_name='served', tp_size=2, disaggregation_mode='decode')",
        Some(T),
    );
    let srv = f.server("x");
    assert_eq!(srv.model_name(), "served");
    assert_eq!(srv.engine_type("x").as_str(), "decode");
    assert!(srv.ranks.is_empty());
    // Every timed line moves the log's clock (a log that goes on with access lines reads idle
    // at its end, as followed live).
    assert_eq!(f.state.log_clock(), Some(T));
}

#[test]
fn a_finished_request_record_is_counted_once() {
    let mut f = Fixture::new(StateConfig::default());
    let line = "[2025-05-06 13:45:00] Finish: obj=GenerateReqInput(text='What is the capital of Japan?', rid='c3', stream=False, log_metrics=True), out={'text': 'Tokyo.', 'meta_info': {'id': 'c3', 'finish_reason': {'type': 'stop', 'matched': 128009}, 'prompt_tokens': 9, 'completion_tokens': 8, 'cached_tokens': 1, 'e2e_latency': 0.2214653491973877}}";
    f.apply("r", line, Some(T));
    let req = f.server("r").requests.as_ref().expect("request stats");
    assert_eq!(req.requests.iter().sum::<u64>(), 1);
    assert_eq!(req.prompt_tokens.iter().sum::<f64>(), 9.0);
    assert_eq!(req.generation_tokens.iter().sum::<f64>(), 8.0);
    assert!(f.server("r").ranks.is_empty());
    assert_eq!(f.state.log_clock(), Some(T));
}

#[test]
fn an_unreadable_value_withdraws_the_gauge() {
    let mut f = Fixture::new(StateConfig::default());
    f.apply(
        "d",
        "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 7, #token: 700, token usage: 0.07, #queue-req: 3",
        Some(T),
    );
    f.apply(
        "d",
        "[2026-06-03 10:00:01 TP0] Decode batch, #running-req: x7, #token: 710, token usage: 0.07, #queue-req: 3",
        Some(T + 1.0),
    );
    let r = f.rank("d", tp(0));
    assert!(r.values[f.id("num_running_reqs")].is_nan());
    assert_eq!(r.values[f.id("num_used_tokens")], 710.0);
}

#[test]
fn limits_drop_ranks_and_fold_unknown_keys() {
    let mut f = Fixture::new(StateConfig {
        max_ranks: 2,
        ..StateConfig::default()
    });
    for n in 0..3 {
        f.apply(
            "d",
            &format!("[2026-06-03 10:00:00 TP{n}] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0"),
            Some(T),
        );
    }
    assert_eq!(f.server("d").ranks.len(), 2);
    assert_eq!(f.state.dropped_series, 1);
    let long = "k".repeat(65);
    let ok = "k".repeat(64);
    f.apply(
        "d",
        &format!("[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 1, {long}: 1, {ok}: 2, #queue-req: 0"),
        Some(T),
    );
    assert_eq!(f.state.unknown_fields.get("other"), Some(&1));
    assert_eq!(f.state.unknown_fields.get(&ok), Some(&1));
    assert_eq!(f.state.unknown_fields.len(), 2);
}

#[test]
fn the_server_bound_drops_the_lines_of_servers_past_it() {
    let mut f = Fixture::new(StateConfig {
        max_servers: 2,
        ..StateConfig::default()
    });
    let line = "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 3, #token: 1, token usage: 0.01, #queue-req: 0";
    for srv in ["a", "b", "c", "a", "c"] {
        f.apply(srv, line, Some(T));
    }
    let names: Vec<&str> = f
        .state
        .servers()
        .keys()
        .map(|k| k.server.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(f.state.dropped_series, 2);
    assert_eq!(f.rank("a", Some(0)).decode_lines, 2);
}

#[test]
fn server_keys_order_as_their_bytes() {
    let k = |s: &str, e: &str| ServerKey {
        server: s.to_string(),
        engine: e.to_string(),
    };
    let names = [
        "",
        "a",
        "ab",
        "abcdefgh",
        "abcdefgh0",
        "abcdefgi",
        "abcdefghabcdefgh",
        "b",
        "é",
        "z\u{0}",
    ];
    for a in names {
        for b in names {
            for (ea, eb) in [("", ""), ("", "x"), ("x y", "x")] {
                let want = (a.as_bytes(), ea.as_bytes()).cmp(&(b.as_bytes(), eb.as_bytes()));
                assert_eq!(
                    k(a, ea).cmp(&k(b, eb)),
                    want,
                    "{a:?}/{ea:?} vs {b:?}/{eb:?}"
                );
            }
        }
    }
}

/// A log resumed after a quiet night: the first line after it disagrees with the clock (held,
/// given the clock's time), the next confirms it, and the first line's rank gets its own time
/// back; a lone wrong-day stats line keeps the clock's time.
#[test]
fn a_rank_whose_line_was_held_gets_its_time_once_confirmed() {
    let mut f = Fixture::new(StateConfig::default());
    let line = |tp: u32| {
        format!("[2026-06-03 10:00:00 TP{tp}] Decode batch, #running-req: 1, #token: 10, token usage: 0.01, gen throughput (token/s): 1.00, #queue-req: 0")
    };
    f.apply("s", &line(0), Some(T));
    f.apply("s", &line(1), Some(T + 1.0));
    let morning = T + 10.0 * 3600.0;
    f.apply("s", &line(0), Some(morning));
    assert_eq!(f.rank("s", tp(0)).last_stats, Some(T + 1.0));
    f.apply("s", &line(1), Some(morning + 1.0));
    assert_eq!(f.rank("s", tp(0)).last_stats, Some(morning));
    assert_eq!(f.rank("s", tp(1)).last_stats, Some(morning + 1.0));
    assert_eq!(f.state.log_clock(), Some(morning + 1.0));
    // Five days ahead, once, then the log's own times again.
    f.apply("s", &line(0), Some(morning + 5.0 * 86_400.0));
    f.apply("s", &line(1), Some(morning + 2.0));
    assert_eq!(f.rank("s", tp(0)).last_stats, Some(morning + 1.0));
    assert_eq!(f.state.log_clock(), Some(morning + 2.0));
}

/// Plain TP: every TP rank prints its KV pool, only TP0 prints stats lines; the API's one DP
/// rank goes to TP0, and the values follow when a log shows another printer.
#[test]
fn the_apis_dp_rank_joins_the_rank_that_prints_stats_lines() {
    use crate::state::live::{ApiReading, DpLoad};
    let mut f = Fixture::new(StateConfig::default());
    for n in [1, 0, 3, 2] {
        f.apply(
            "s",
            &format!("[2026-06-03 10:00:00 TP{n}] KV Cache is allocated. #tokens: 500000, K size: 10.00 GB, V size: 10.00 GB"),
            Some(T),
        );
    }
    f.apply(
        "s",
        "[2026-06-03 10:00:01 TP0] Decode batch, #running-req: 1, #token: 50, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0",
        Some(T + 1.0),
    );
    let reading = ApiReading {
        endpoint: "/v1/loads",
        info: None,
        loads: vec![DpLoad {
            dp_rank: 0,
            values: vec![("num_running_reqs", 9.0)],
            bad: 0,
        }],
    };
    f.state.apply_api("s", &reading, T + 2.0);
    let running = f.id("num_running_reqs");
    let srv = f.server("s");
    let live: Vec<_> = srv
        .ranks
        .iter()
        .filter(|(_, r)| r.live.is_some())
        .map(|(k, r)| (k.tp, r.live.as_ref().unwrap().values[running]))
        .collect();
    assert_eq!(live, vec![(tp(0), 9.0)]);
    assert_eq!(srv.ranks.len(), 4, "no rank of its own for the API");
    let (srv, rank) = (f.server("s"), f.rank("s", tp(0)));
    assert_eq!(
        crate::view::value(&f.state, srv, rank, running, T + 3.0),
        Some(9.0)
    );
    // Down: the activity gauge is withdrawn, never the log's older 1.
    f.state.api_failed("s");
    let (srv, rank) = (f.server("s"), f.rank("s", tp(0)));
    assert_eq!(
        crate::view::value(&f.state, srv, rank, running, T + 3.0),
        None
    );
    // A server with no log at all: DP ranks as SGLang tags them under DP attention.
    let info = crate::source::api::shapes::server_info(
        br#"{
        "tp_size": 8, "dp_size": 4, "ep_size": 8, "enable_dp_attention": true,
        "disaggregation_mode": "null"}"#,
    )
    .unwrap();
    let reading = ApiReading {
        endpoint: "/v1/loads",
        info: Some(info),
        loads: (0..4)
            .map(|dp| DpLoad {
                dp_rank: dp,
                values: vec![("num_running_reqs", f64::from(dp))],
                bad: 0,
            })
            .collect(),
    };
    f.state.apply_api("api-only", &reading, T);
    // Garbage sizes never divide by 0.
    let zero = crate::source::api::shapes::server_info(
        br#"{
        "tp_size": 0, "dp_size": 0, "ep_size": 3, "enable_dp_attention": true}"#,
    )
    .unwrap();
    let odd = ApiReading {
        info: Some(zero),
        ..reading.clone()
    };
    f.state.apply_api("zero", &odd, T);
    assert_eq!(f.server("zero").ranks.len(), 4);
    let keys: Vec<_> = f
        .server("api-only")
        .ranks
        .keys()
        .map(|r| (r.dp, r.tp, r.ep))
        .collect();
    assert_eq!(
        keys,
        vec![
            (Some(0), tp(0), Some(0)),
            (Some(1), tp(2), Some(2)),
            (Some(2), tp(4), Some(4)),
            (Some(3), tp(6), Some(6)),
        ]
    );
}

/// An API-only rank (DP1 named TP4 as SGLang's prefix would be) meets the log's printer for
/// DP1 (TP5): the values move to it at the stats line, never two series for one DP rank.
#[test]
fn the_logs_printer_takes_the_apis_values_at_its_first_stats_line() {
    use crate::state::live::{ApiReading, DpLoad};
    let mut f = Fixture::new(StateConfig::default());
    let info = crate::source::api::shapes::server_info(
        br#"{
        "tp_size": 8, "dp_size": 2, "enable_dp_attention": true, "disaggregation_mode": "null"}"#,
    )
    .unwrap();
    let reading = ApiReading {
        endpoint: "/v1/loads",
        info: Some(info),
        loads: (0..2)
            .map(|dp| DpLoad {
                dp_rank: dp,
                values: vec![("num_running_reqs", 11.0 + f64::from(dp))],
                bad: 0,
            })
            .collect(),
    };
    f.state.apply_api("s", &reading, T);
    let keys =
        |f: &Fixture| -> Vec<_> { f.server("s").ranks.keys().map(|r| (r.dp, r.tp)).collect() };
    assert_eq!(keys(&f), vec![(Some(0), tp(0)), (Some(1), tp(4))]);
    f.apply(
        "s",
        "[2026-06-03 10:00:01 DP1 TP5] Decode batch, #running-req: 50, #token: 50, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0",
        Some(T + 1.0),
    );
    assert_eq!(keys(&f), vec![(Some(0), tp(0)), (Some(1), tp(5))]);
    let running = f.id("num_running_reqs");
    let srv = f.server("s");
    let rank = &srv.ranks[&Ranks {
        dp: Some(1),
        tp: tp(5),
        ..Ranks::default()
    }];
    assert_eq!(
        crate::view::value(&f.state, srv, rank, running, T + 1.0),
        Some(12.0)
    );
    assert_eq!(f.state.ranks_total, 2);
    // The next poll keeps them there.
    f.state.apply_api("s", &reading, T + 2.0);
    assert_eq!(keys(&f), vec![(Some(0), tp(0)), (Some(1), tp(5))]);
}

/// Lines no kind reads at the end of an input move the clock (hostile pass,
/// `tests/data/clock/quiet-other-lines.log`): the rank reads idle at the input's last timed
/// line; a lone one a day ahead does not move it; one that confirms a held stats line's time
/// gives that rank its own time back.
#[test]
fn times_of_lines_without_a_record_move_the_clock() {
    let line = |tp: u32| {
        format!("[2026-06-03 10:00:00 TP{tp}] Decode batch, #running-req: 3, #token: 100, token usage: 0.10, gen throughput (token/s): 1.00, #queue-req: 0")
    };
    let mut f = Fixture::new(StateConfig::default());
    f.apply("s", &line(0), Some(T));
    f.apply("s", &line(0), Some(T + 10.0));
    let src = f.state.clock_id("src");
    f.state.observe_times(src, &[T + 80.0, T + 140.0]);
    assert_eq!(f.state.log_clock(), Some(T + 140.0));
    assert!(f.rank("s", tp(0)).is_idle(T + 140.0, 30.0));
    f.state.observe_times(src, &[T + 140.0 + 86_400.0]);
    assert_eq!(f.state.log_clock(), Some(T + 140.0));
    // A stats line after a quiet night is held (the clock's time); a line without a record
    // after it confirms the night.
    let mut f = Fixture::new(StateConfig::default());
    f.apply("s", &line(0), Some(T));
    f.apply("s", &line(0), Some(T + 1.0));
    let morning = T + 10.0 * 3600.0;
    f.apply("s", &line(0), Some(morning));
    assert_eq!(f.rank("s", tp(0)).last_stats, Some(T + 1.0));
    let src = f.state.clock_id("src");
    f.state.observe_times(src, &[morning + 5.0]);
    assert_eq!(f.rank("s", tp(0)).last_stats, Some(morning));
    assert_eq!(f.state.log_clock(), Some(morning + 5.0));
}

/// Each input has its own log clock (hostile pass): a log of 09:00 read after one of 12:00 is
/// no outlier of the other's: its rank keeps its own last stats time (and reads idle at the
/// end of both, 12:00), and a first line a day ahead in it is mended by its own clock.
#[test]
fn each_input_has_its_own_log_clock() {
    let line = |tp: u32| {
        format!("[2026-06-03 10:00:00 TP{tp}] Decode batch, #running-req: 3, #token: 100, token usage: 0.10, gen throughput (token/s): 1.00, #queue-req: 0")
    };
    let mut f = Fixture::new(StateConfig::default());
    let noon = T + 4.0 * 3600.0;
    let mut p = Parser::new(f.pat.clone());
    let text = line(0);
    let rec = p.parse(&text).unwrap();
    for i in 0..8 {
        f.state
            .apply("a.log", "a", &rec, Some(T + 1800.0 * f64::from(i)));
    }
    f.state.apply("a.log", "a", &rec, Some(noon));
    // b: a first line a day ahead, then two lines at T - 3600 (an hour before a's first).
    let early = T - 3600.0;
    f.state.apply("b.log", "b", &rec, Some(early + 86_400.0));
    f.state.apply("b.log", "b", &rec, Some(early));
    f.state.apply("b.log", "b", &rec, Some(early + 10.0));
    assert_eq!(f.rank("a", tp(0)).last_stats, Some(noon));
    assert_eq!(f.rank("b", tp(0)).last_stats, Some(early + 10.0));
    assert_eq!(f.state.log_clock(), Some(noon));
    assert!(f.rank("b", tp(0)).is_idle(noon, 30.0));
    assert!(!f.rank("a", tp(0)).is_idle(noon, 30.0));
}

/// The hostile pass's F3: 64 engines (kubectl `--prefix`) naming pods of 200 KB made a 333 MB
/// exposition. Every label value the state keeps from the input is bounded where it comes in:
/// the engine and server of a line, `model_name`, the source's Kubernetes labels, the source
/// and the self metrics' labels; two long names stay two series.
#[test]
fn label_values_from_the_input_are_bounded_where_they_come_in() {
    let mut f = Fixture::new(StateConfig::default());
    let line = "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0";
    let engines: Vec<String> = (0..2)
        .map(|e| format!("pod/{}{e}/sglang", "p".repeat(200_000)))
        .collect();
    for e in &engines {
        let mut rec = f.parser.parse(line).unwrap();
        rec.engine = Some(e);
        f.state.apply(&"s".repeat(1000), "x", &rec, Some(T));
    }
    let long_server = "v".repeat(300);
    f.state.set_source_labels(
        &long_server,
        vec![("namespace", "n".repeat(400)), ("pod", "sglang-0".into())],
    );
    f.apply(
        &long_server,
        &format!(
            "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='{m}', served_model_name='{m}', tp_size=1)",
            m = "m".repeat(5000)
        ),
        Some(T),
    );
    f.state
        .add_self(SelfMetric::SourceUp, &"/var/log/".repeat(100), 1.0);
    let keys: Vec<ServerKey> = f.state.servers().keys().cloned().collect();
    assert_eq!(keys.len(), 3);
    let engine_keys: Vec<&str> = keys
        .iter()
        .filter(|k| k.server == "x")
        .map(|k| k.engine.as_str())
        .collect();
    assert_eq!(
        engine_keys,
        [
            format!("pod/{}~058cc8104aa33e0f", "p".repeat(235)),
            format!("pod/{}~43d3c9728fe5c1d2", "p".repeat(235)),
        ]
    );
    let srv = keys.iter().find(|k| k.server != "x").unwrap().clone();
    assert_eq!(srv.server.len(), crate::label::MAX_BYTES);
    assert!(srv.server.starts_with("vvv"));
    let s = &f.state.servers()[&srv];
    assert_eq!(s.model_name().len(), crate::label::MAX_BYTES);
    assert_eq!(s.source_labels[0].1.len(), crate::label::MAX_BYTES);
    assert_eq!(s.source_labels[1].1, "sglang-0");
    // The source named by `apply` and the self metric's label.
    assert!(f
        .state
        .sources
        .keys()
        .chain(f.state.self_metrics.keys().map(|(_, l)| l))
        .all(|l| l.len() <= crate::label::MAX_BYTES));
    // The same long name again is the same server (bounded the same way), not a new one.
    f.state.claim(&long_server);
    f.state.retire_server(&long_server, T);
    assert!(f.state.servers()[&srv].retired_at.is_some());
    // Every label value of the exposition is bounded: 27 series of 3 servers, not 333 MB.
    let fams = crate::export::metrics::families(&f.state, T);
    let text = crate::export::metrics::encode_text(&fams);
    for fam in &fams {
        for (labels, _) in &fam.samples {
            assert!(labels
                .iter()
                .all(|(_, v)| v.len() <= crate::label::MAX_BYTES));
        }
    }
    assert!(text.len() < 200_000, "{}", text.len());
}

/// What the state removes is kept, with its server as it was and when, once asked
/// (`backfill`, hostile pass 31 H5): a restart's ranks at the `server_args` line's time, an
/// engine at its expiry (an hour after its last line); nothing when not asked.
#[test]
fn removed_ranks_are_kept_with_their_time_when_asked() {
    let stats = "[2026-06-03 10:00:00] Decode batch, #running-req: 30, #token: 300, token usage: 0.30, #queue-req: 0";
    let args = "[2026-06-03 10:05:00] server_args=ServerArgs(model_path='m', tp_size=1)";
    let mut f = Fixture::new(StateConfig::default());
    f.apply("d", stats, Some(T));
    f.apply("d", args, Some(T + 300.0));
    assert!(f.state.take_dropped().is_empty());
    f.state.keep_dropped();
    f.apply("d", stats, Some(T + 400.0));
    f.apply("d", args, Some(T + 500.0));
    let d = f.state.take_dropped();
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].key.clone(), d[0].at),
        (ServerKey::plain("d"), Some(T + 500.0))
    );
    let r = &d[0].server.ranks[&Ranks::default()];
    assert_eq!(r.values[f.id("num_running_reqs")], 30.0);
    assert_eq!(r.last_stats, Some(T + 400.0));
    assert!(f.server("d").ranks.is_empty());
    assert!(f.state.take_dropped().is_empty());
    // An engine silent for an hour: removed at its expiry, not at the time `expire` is called.
    let key = ServerKey {
        server: "d".into(),
        engine: "e1".into(),
    };
    let rec = f.parser.parse(stats).unwrap();
    let clock = f.state.clock_id("src");
    f.state
        .apply_placed("src", clock, &key, &rec, Some(T + 600.0));
    f.state.expire(T + 600.0 + 5000.0);
    let d = f.state.take_dropped();
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].key.clone(), d[0].at), (key, Some(T + 600.0 + 3600.0)));
}

/// The first user whose user unit of a name logged on a host keeps the name (hostile pass 31,
/// H6): per server name and host; another user of that host is not the first; past the
/// server cap no new pair is (its lines become an engine, never merged).
#[test]
fn the_first_user_of_a_unit_name_on_a_host_keeps_it() {
    let mut f = Fixture::new(StateConfig {
        max_servers: 3,
        ..StateConfig::default()
    });
    let s = &mut f.state;
    assert!(s.first_user("sglang", "h", "user@1000"));
    assert!(!s.first_user("sglang", "h", "user@1001"));
    assert!(s.first_user("sglang", "h", "user@1000"));
    // Another host, another name: their own first users.
    assert!(s.first_user("sglang", "h2", "user@1001"));
    assert!(s.first_user("other", "h", "user@1001"));
    // The table is full (3 pairs).
    assert!(!s.first_user("third", "h", "user@1000"));
    assert!(!s.first_user("sglang", "h", "user@1001"));
}

/// Issue 37 item 1: one single-GPU scheduler printed `TP0` (v0.3.4-v0.4.6.post1) and then no
/// tag (v0.4.6.post2+), a log across the upgrade without its `server_args`. Both render
/// `tp_rank="0"`, so they are one rank (two were 26 duplicate samples): its counts are both
/// lines', its gauges the last line's, and the exposition has each series once.
#[test]
fn a_tagged_and_an_untagged_line_of_one_scheduler_are_one_rank() {
    let mut f = Fixture::new(StateConfig::default());
    f.apply(
        "s",
        "[2025-02-27 04:46:39 TP0] Decode batch, #running-req: 8, #token: 62531, token usage: 0.12, gen throughput (token/s): 186.64, #queue-req: 0",
        Some(T),
    );
    f.apply(
        "s",
        "[2025-05-14 09:32:02] Decode batch, #running-req: 64, #token: 250981, token usage: 0.62, gen throughput (token/s): 1366.53, #queue-req: 2",
        Some(T + 10.0),
    );
    f.apply(
        "s",
        "[2025-05-14 09:32:03 TP0 EP0 PP0] Prefill batch, #new-seq: 1, #new-token: 10, #cached-token: 30, token usage: 0.63, #running-req: 64, #queue-req: 1",
        Some(T + 11.0),
    );
    let srv = f.server("s");
    assert_eq!(srv.ranks.len(), 1);
    // The first form seen stays the key.
    let r = f.rank("s", tp(0));
    assert_eq!((r.decode_lines, r.prefill_lines), (2, 1));
    assert_eq!(r.values[f.id("num_running_reqs")], 64.0);
    assert_eq!(r.values[f.id("num_queue_reqs")], 1.0);
    assert_eq!(r.values[f.id("token_usage")], 0.63);
    assert_eq!(r.values[f.id("gen_throughput")], 1366.53);
    assert_eq!(r.last_stats, Some(T + 11.0));
    let fams = crate::export::metrics::collect(&f.state, T + 11.0);
    assert_eq!(crate::export::valid::check(&fams), Vec::<String>::new());
    let running = fams
        .iter()
        .find(|x| x.name == "sglang:num_running_reqs")
        .unwrap();
    let labels: Vec<(&str, &str)> = running.samples[0]
        .0
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .collect();
    assert_eq!(running.samples.len(), 1);
    assert_eq!(running.samples[0].1, 64.0);
    assert_eq!(
        labels[labels.len() - 3..],
        [("pp_rank", "0"), ("tp_rank", "0"), ("moe_ep_rank", "0")]
    );
}

/// A `DP0` line and an untagged one are not one scheduler: `dp_rank` labels only the first.
#[test]
fn a_dp_tag_keeps_its_rank_apart() {
    let mut f = Fixture::new(StateConfig::default());
    let line = |tag: &str| {
        format!("[2025-05-14 09:32:02{tag}] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0")
    };
    f.apply("s", &line(" DP0 TP0"), Some(T));
    f.apply("s", &line(""), Some(T));
    assert_eq!(f.server("s").ranks.len(), 2);
    let fams = crate::export::metrics::collect(&f.state, T);
    assert_eq!(crate::export::valid::check(&fams), Vec::<String>::new());
}

/// `SGLANG_RUST_SERVER=1`: each DP rank's Rust server logs its own port; `--sglang.from-logs`
/// polls each of them (the `url` label stays the base port's), a failed port withdraws its own
/// rank's live values only, and a restart (a new `server_args` dump) forgets the ports.
#[test]
fn rust_servers_are_polled_per_dp_rank_and_fail_alone() {
    use crate::state::live::{ApiReading, DpLoad};
    use crate::state::polled::PollTarget;
    let mut f = Fixture::new(StateConfig::default());
    let args = "[2026-08-14 18:00:00] server_args=ServerArgs(model_path='m', host='0.0.0.0', \
                port=30000, tp_size=2, dp_size=2, enable_dp_attention=True)";
    f.apply("s", args, Some(T));
    let whole = |port: u16| PollTarget {
        server: "s".into(),
        url: format!("http://127.0.0.1:{port}"),
        base: "http://127.0.0.1:30000".into(),
        port: None,
    };
    assert_eq!(f.state.from_logs_targets(&[]), vec![whole(30000)]);
    for dp in [1, 0] {
        f.apply(
            "s",
            &format!("[2026-08-14 18:00:09 DP{dp} TP{dp}] SGLANG_RUST_SERVER enabled, Rust server listen on 0.0.0.0:3000{dp} (DP rank {dp}/2)"),
            Some(T + 1.0),
        );
    }
    let srv = f.server("s");
    assert_eq!(
        srv.listen_ports
            .iter()
            .map(|(p, d)| (*p, *d))
            .collect::<Vec<_>>(),
        vec![(30000, Some(0)), (30001, Some(1))]
    );
    assert!(srv.ranks.is_empty(), "a listen line makes no rank");
    let part = |port: u16| PollTarget {
        port: Some(port),
        ..whole(port)
    };
    assert_eq!(
        f.state.from_logs_targets(&[]),
        vec![part(30000), part(30001)]
    );
    assert!(f.state.from_logs_targets(&["s".into()]).is_empty());
    let reading = |dp: u32, running: f64| ApiReading {
        endpoint: "/v1/loads",
        info: None,
        loads: vec![DpLoad {
            dp_rank: dp,
            values: vec![("num_running_reqs", running)],
            bad: 0,
        }],
    };
    f.state
        .apply_api_at("s", Some(30000), &reading(0, 32.0), T + 2.0);
    f.state
        .apply_api_at("s", Some(30001), &reading(1, 17.0), T + 2.0);
    let running = f.id("num_running_reqs");
    let live = |f: &Fixture| -> Vec<(Option<u32>, Option<f64>, bool)> {
        let srv = f.server("s");
        srv.ranks
            .iter()
            .map(|(k, r)| {
                let v = crate::view::value(&f.state, srv, r, running, T + 3.0);
                (k.dp, v, r.live.as_ref().is_some_and(|l| l.up))
            })
            .collect()
    };
    // Each port's answer lists its own rank: neither withdraws the other's.
    assert_eq!(
        live(&f),
        vec![(Some(0), Some(32.0), true), (Some(1), Some(17.0), true)]
    );
    f.state.api_failed_at("s", Some(30001));
    assert_eq!(
        live(&f),
        vec![(Some(0), Some(32.0), true), (Some(1), None, false)]
    );
    assert_eq!(f.state.api_up("s"), Some(true), "DP0's port still answers");
    f.state.api_failed_at("s", Some(30000));
    assert_eq!(f.state.api_up("s"), Some(false));
    assert_eq!(
        live(&f),
        vec![(Some(0), None, false), (Some(1), None, false)]
    );
    // A restart forgets the old process's ports: its one port again.
    f.apply("s", args, Some(T + 10.0));
    assert!(f.server("s").listen_ports.is_empty());
    assert_eq!(f.state.from_logs_targets(&[]), vec![whole(30000)]);
}

/// The listen ports a log names are kept up to the per-server rank cap.
#[test]
fn listen_ports_are_bounded_by_the_rank_cap() {
    let mut f = Fixture::new(StateConfig {
        max_ranks: 3,
        ..StateConfig::default()
    });
    for p in 0..10 {
        f.apply(
            "s",
            &format!(
                "[2026-08-14 18:00:09] SGLANG_RUST_SERVER enabled, Rust server listen on [::]:{}",
                30000 + p
            ),
            Some(T),
        );
    }
    let ports: Vec<u16> = f.server("s").listen_ports.keys().copied().collect();
    assert_eq!(ports, vec![30000, 30001, 30002]);
}
