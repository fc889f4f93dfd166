//! Renders the state (and any other collector's families) as Prometheus metric families and as
//! the text exposition format.
//!
//! Rendering is a pure function of a state snapshot and "now": the HTTP endpoint and the pusher
//! call it on their own schedule; parsing never waits for them longer than one lock.

use prometheus::proto;

use crate::family::{Family, Kind, Labels};
use crate::parse::patterns::{MetricKind, Scope};
use crate::record::Ranks;
use crate::state::{RankState, ServerState, State};

/// `Content-Type` of the text exposition (Prometheus 3 refuses a scrape without one).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Self metrics that other parts of the program set through [`State::add_extra`] /
/// [`State::set_extra`]: (name, HELP, type, label name; an empty label name means no label).
pub const EXTRA: &[(&str, &str, Kind, &str)] = &[
    (
        "sglang_log_exporter_journalctl_restarts_total",
        "Times a journalctl child was restarted after it exited or died.",
        Kind::Counter,
        "unit",
    ),
    (
        "sglang_log_exporter_source_up",
        "1 while a source is open and being read, 0 while it is missing or failing.",
        Kind::Gauge,
        "source",
    ),
    (
        "sglang_log_exporter_push_last_success_timestamp_seconds",
        "Unix time in seconds of the last successful push to the Pushgateway.",
        Kind::Gauge,
        "",
    ),
    (
        "sglang_log_exporter_pushes_total",
        "Successful pushes to the Pushgateway.",
        Kind::Counter,
        "",
    ),
    (
        "sglang_log_exporter_push_failures_total",
        "Push requests to the Pushgateway that failed (no answer, timeout or an error status).",
        Kind::Counter,
        "",
    ),
    (
        "sglang_log_exporter_push_last_status",
        "HTTP status of the last push request to the Pushgateway; 0 when none came back.",
        Kind::Gauge,
        "",
    ),
];

/// Every family of the state at time `now` (Unix seconds): SGLang-compatible metrics, ours, and
/// the exporter's self metrics. Families without samples are left out.
pub fn families(state: &State, now: f64) -> Vec<Family> {
    let pat = state.patterns();
    let idle_after = state.config().idle_after;
    let mut out = Vec::new();
    for (id, def) in pat.metrics.iter().enumerate() {
        let kind = match def.kind {
            MetricKind::Gauge => Kind::Gauge,
            MetricKind::Counter => Kind::Counter,
        };
        let mut fam = Family::new(&def.name, &def.help, kind);
        for (name, srv) in state.servers() {
            if def.scope == Scope::Server && srv.ranks.is_empty() {
                let v = srv.values[id];
                if !v.is_nan() {
                    fam.push(rank_labels(name, srv, &Ranks::default()), v);
                }
                continue;
            }
            for (ranks, rank) in &srv.ranks {
                if let Some(v) = shown_value(state, srv, rank, id, now) {
                    fam.push(rank_labels(name, srv, ranks), v);
                }
            }
        }
        out.push(fam);
    }
    out.extend(rank_families(state, now, idle_after));
    out.extend(server_families(state));
    out.extend(super::kv::families(state, now));
    out.extend(self_families(state));
    out.extend(state.collected.values().flatten().cloned());
    out.retain(|f| !f.samples.is_empty());
    out
}

/// The value a scrape shows for metric `id` of a rank at `now`: the server-scope value (the
/// capacity line) where there is one, else the rank's; 0 for an activity gauge of an idle rank;
/// 0 for a counter of a rank that prints stats but never added to it (so the first retraction is
/// an increase from 0 that `increase()` and alerts can see); `None` where never set.
pub fn shown_value(
    state: &State,
    srv: &ServerState,
    rank: &RankState,
    id: usize,
    now: f64,
) -> Option<f64> {
    let v = if srv.values[id].is_nan() {
        rank.values[id]
    } else {
        srv.values[id]
    };
    let def = &state.patterns().metrics[id];
    if v.is_nan() {
        return (def.kind == MetricKind::Counter && rank.last_stats.is_some()).then_some(0.0);
    }
    let idle_after = state.config().idle_after;
    if def.activity && rank.is_idle(now, idle_after) {
        return Some(0.0);
    }
    Some(v)
}

/// The label set of SGLang's scheduler metrics plus `server`; ranks a line does not name are
/// empty strings (`moe_ep_rank` is the `EPn` tag). `attn_cp_rank`/`moe_dp_rank` (v0.5.9+) are
/// added only where the prefix names them.
pub fn rank_labels(server: &str, srv: &ServerState, r: &Ranks) -> Labels {
    let s = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_default();
    let mut l: Labels = vec![
        ("server", server.to_string()),
        ("model_name", srv.model_name().to_string()),
        ("engine_type", srv.engine_type(server).as_str().to_string()),
        ("dp_rank", s(r.dp)),
        ("pp_rank", s(r.pp)),
        ("tp_rank", s(r.tp)),
        ("moe_ep_rank", s(r.ep)),
    ];
    if r.attn_cp.is_some() {
        l.push(("attn_cp_rank", s(r.attn_cp)));
    }
    if r.moe_dp.is_some() {
        l.push(("moe_dp_rank", s(r.moe_dp)));
    }
    l
}

fn rank_families(state: &State, now: f64, idle_after: f64) -> Vec<Family> {
    let mut idle = Family::new(
        "sglang_idle",
        "1 when the rank printed no stats line for --idle-after seconds (its activity gauges then read 0), else 0.",
        Kind::Gauge,
    );
    let mut last = Family::new(
        "sglang_last_stats_timestamp_seconds",
        "Unix time in seconds of the rank's last prefill or decode stats line.",
        Kind::Gauge,
    );
    let mut prefill = Family::new(
        "sglang_prefill_batches_total",
        "Prefill batches, one per Prefill batch line.",
        Kind::Counter,
    );
    let mut decode = Family::new(
        "sglang_decode_stats_lines_total",
        "Decode batch stats lines (one every --decode-log-interval decode steps).",
        Kind::Counter,
    );
    let mut retract = Family::new(
        "sglang_retractions_total",
        "Retraction events (KV cache pool full), one per retraction line.",
        Kind::Counter,
    );
    for (name, srv) in state.servers() {
        for (ranks, rank) in &srv.ranks {
            let labels = || rank_labels(name, srv, ranks);
            if let Some(t) = rank.last_stats {
                idle.push(labels(), f64::from(u8::from(rank.is_idle(now, idle_after))));
                last.push(labels(), t);
            }
            // Counters exist from a rank's first stats line (at 0), so their first increase is
            // seen by `rate()`/`increase()`.
            let stats = rank.last_stats.is_some();
            if stats || rank.prefill_lines > 0 {
                prefill.push(labels(), rank.prefill_lines as f64);
            }
            if stats || rank.decode_lines > 0 {
                decode.push(labels(), rank.decode_lines as f64);
            }
            if stats || rank.retractions > 0 {
                retract.push(labels(), rank.retractions as f64);
            }
        }
    }
    vec![idle, last, prefill, decode, retract]
}

fn server_families(state: &State) -> Vec<Family> {
    let mut info = Family::new(
        "sglang_server_info",
        "Always 1; labels name each SGLang server the exporter reads, its model and engine type.",
        Kind::Gauge,
    );
    let mut http = Family::new(
        "sglang_http_requests_total",
        "HTTP requests from the server's uvicorn access lines, by method, normalised path and status.",
        Kind::Counter,
    );
    for (name, srv) in state.servers() {
        let engine = srv.engine_type(name).as_str().to_string();
        let size = |f: fn(&crate::record::ServerArgs) -> Option<u32>| {
            srv.args
                .as_ref()
                .and_then(f)
                .map(|n| n.to_string())
                .unwrap_or_default()
        };
        info.push(
            vec![
                ("server", name.clone()),
                ("model_name", srv.model_name().to_string()),
                ("engine_type", engine.clone()),
                ("tp_size", size(|a| a.tp_size)),
                ("dp_size", size(|a| a.dp_size)),
                ("pp_size", size(|a| a.pp_size)),
            ],
            1.0,
        );
        for ((method, path, status), n) in &srv.http {
            http.push(
                vec![
                    ("server", name.clone()),
                    ("model_name", srv.model_name().to_string()),
                    ("engine_type", engine.clone()),
                    ("method", method.to_string()),
                    ("path", path.to_string()),
                    ("status", status.to_string()),
                ],
                *n as f64,
            );
        }
    }
    vec![info, http]
}

fn self_families(state: &State) -> Vec<Family> {
    let counter = |name: &str, help: &str| Family::new(name, help, Kind::Counter);
    let mut lines = counter(
        "sglang_log_exporter_lines_read_total",
        "Lines read from each source.",
    );
    let mut bytes = counter(
        "sglang_log_exporter_bytes_read_total",
        "Bytes read from each source.",
    );
    let mut matched = counter(
        "sglang_log_exporter_lines_matched_total",
        "Lines that matched a line kind of the pattern file, by source and kind.",
    );
    let mut unmatched = counter(
        "sglang_log_exporter_lines_unmatched_total",
        "Lines that matched no line kind (other log output), by source.",
    );
    let mut oversized = counter(
        "sglang_log_exporter_lines_oversized_total",
        "Lines longer than --max-line-bytes, skipped, by source.",
    );
    let mut incomplete = counter(
        "sglang_log_exporter_lines_incomplete_total",
        "Partial last lines (no newline) dropped at the end of an input or at rotation or truncation, by source.",
    );
    let mut invalid = counter(
        "sglang_log_exporter_lines_invalid_utf8_total",
        "Lines that were not valid UTF-8 and were read lossily, by source.",
    );
    let mut errors = counter(
        "sglang_log_exporter_read_errors_total",
        "Errors opening or reading a source (missing, unreadable, a directory), by source.",
    );
    let mut bad = counter(
        "sglang_log_exporter_field_value_errors_total",
        "Known fields whose value was not a number, by source.",
    );
    let pat = state.patterns();
    for (name, s) in &state.sources {
        let l = || vec![("source", name.clone())];
        lines.push(l(), s.lines as f64);
        bytes.push(l(), s.bytes as f64);
        unmatched.push(l(), s.unmatched as f64);
        oversized.push(l(), s.oversized as f64);
        invalid.push(l(), s.invalid_utf8 as f64);
        incomplete.push(l(), s.incomplete as f64);
        errors.push(l(), s.errors as f64);
        bad.push(l(), s.bad_values as f64);
        for (k, n) in &s.matched {
            matched.push(
                vec![
                    ("source", name.clone()),
                    ("kind", pat.lines[*k].name.clone()),
                ],
                *n as f64,
            );
        }
    }
    let mut unknown = counter(
        "sglang_log_exporter_unknown_fields_total",
        "Fields of known lines whose key the pattern file does not know, by key (bounded; the rest count as other).",
    );
    for (k, n) in &state.unknown_fields {
        unknown.push(vec![("field", k.clone())], *n as f64);
    }
    let dropped = counter(
        "sglang_log_exporter_series_dropped_total",
        "Servers, ranks, sources or HTTP series refused because a cardinality limit was reached.",
    )
    .with(vec![], state.dropped_series as f64);
    let build = Family::new(
        "sglang_log_exporter_build_info",
        "Always 1; the labels name the exporter build: its version and git revision.",
        Kind::Gauge,
    )
    .with(
        vec![
            ("revision", env!("SGLANG_LOG_EXPORTER_REVISION").to_string()),
            ("version", env!("CARGO_PKG_VERSION").to_string()),
        ],
        1.0,
    );
    let mut out = vec![
        build, lines, bytes, matched, unmatched, oversized, incomplete, invalid, errors, bad,
        unknown, dropped,
    ];
    for (name, help, kind, label) in EXTRA {
        let mut f = Family::new(*name, *help, *kind);
        for ((n, lv), v) in &state.extra {
            if n == name {
                let labels = if label.is_empty() {
                    vec![]
                } else {
                    vec![(*label, lv.clone())]
                };
                f.push(labels, *v);
            }
        }
        out.push(f);
    }
    out
}

/// Encodes families in the Prometheus text format (version 0.0.4), through the `prometheus`
/// crate's encoder. Families without samples are skipped.
pub fn encode_text(families: &[Family]) -> String {
    let protos: Vec<proto::MetricFamily> = families
        .iter()
        .filter(|f| !f.samples.is_empty())
        .map(to_proto)
        .collect();
    let mut out = String::new();
    // The encoder fails only on empty or nameless families, which are filtered above.
    if let Err(e) = prometheus::TextEncoder::new().encode_utf8(&protos, &mut out) {
        tracing::error!("encoding the exposition failed: {e}");
    }
    out
}

fn to_proto(f: &Family) -> proto::MetricFamily {
    let mut mf = proto::MetricFamily::default();
    mf.set_name(f.name.clone());
    mf.set_help(f.help.clone());
    mf.set_field_type(match f.kind {
        Kind::Gauge => proto::MetricType::GAUGE,
        Kind::Counter => proto::MetricType::COUNTER,
    });
    for (labels, v) in &f.samples {
        let mut m = proto::Metric::default();
        m.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut lp = proto::LabelPair::default();
                    lp.set_name(k.to_string());
                    lp.set_value(v.clone());
                    lp
                })
                .collect(),
        );
        match f.kind {
            Kind::Gauge => {
                let mut g = proto::Gauge::default();
                g.set_value(*v);
                m.set_gauge(g);
            }
            Kind::Counter => {
                let mut c = proto::Counter::default();
                c.set_value(*v);
                m.set_counter(c);
            }
        }
        mf.mut_metric().push(m);
    }
    mf
}
