//! Renders the state (and any other collector's families) as Prometheus metric families and as
//! the text exposition format.
//!
//! Rendering is a pure function of a state snapshot and "now": the HTTP endpoint and the pusher
//! call it on their own schedule; parsing never waits for them longer than one lock.

use prometheus::proto;

use std::collections::BTreeMap;

use crate::catalog;
use crate::family::{Family, Kind};
use crate::parse::unread::Looks;
use crate::state::{SelfFamily, SelfMetric, SourceStats, State};
use crate::view;

use super::format::Variant;
use super::valid;

/// `Content-Type` of the text exposition (Prometheus 3 refuses a scrape without one).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Every family of the state at time `now` (Unix seconds): SGLang-compatible metrics, ours, and
/// the exporter's self metrics. Families without samples are left out.
///
/// The request families (counters and histograms from `--log-requests` Finish records) follow
/// the per-rank ones.
///
/// What it returns keeps [`crate::export::valid`]'s rule (no series twice, each family once):
/// [`collect`]'s families through [`valid::enforce`].
pub fn families(state: &State, now: f64) -> Vec<Family> {
    let mut out = collect(state, now);
    if valid::enforce(&mut out) > 0 {
        // This rendering's own withheld samples, counted already.
        let f = out.iter_mut().find(|f| f.name == WITHHELD);
        if let Some((_, v)) = f.and_then(|f| f.samples.first_mut()) {
            *v = valid::withheld() as f64;
        }
    }
    out
}

/// `families` encoded as `v` says ([`encode`]), with the renamed families also under their old
/// names when `old_names` (`--web.old-names`, [`add_old_names`]): what `/metrics`, `--once` and
/// the push write.
pub fn encode_served(mut families: Vec<Family>, v: Variant, old_names: bool) -> String {
    if old_names {
        add_old_names(&mut families, v);
    }
    encode(&families, v)
}

/// Appends a copy of each [`crate::catalog::RENAMED`] family under its old name
/// (`--web.old-names`), except where `v` writes the old name as a family's name already: under
/// underscores `sglang_swa_used_tokens` is SGLang's `sglang:swa_used_tokens` (the same series)
/// and `sglang_http_requests_total` SGLang's `sglang:http_requests_total` (other labels).
fn add_old_names(families: &mut Vec<Family>, v: Variant) {
    let taken: std::collections::HashSet<String> = families
        .iter()
        .map(|f| super::format::written_name(&f.name, v))
        .collect();
    let old: Vec<Family> = families
        .iter()
        .filter_map(|f| {
            let (new, old) = crate::catalog::RENAMED
                .iter()
                .find(|(new, _)| *new == f.name)?;
            if taken.contains(&super::format::written_name(old, v)) {
                return None;
            }
            let mut f = f.clone();
            f.name = old.to_string();
            f.help = format!("{} (the old name of {new}, until the next release)", f.help);
            Some(f)
        })
        .collect();
    families.extend(old);
}

/// The name of the family counting [`valid::withheld`].
const WITHHELD: &str = SelfFamily::SamplesWithheld.def().name;

/// [`families`] before [`valid::enforce`]: what the state renders, for the tests and the fuzzer
/// to [`valid::check`].
pub fn collect(state: &State, now: f64) -> Vec<Family> {
    let mut out = view::rank_families(state, now);
    out.extend(view::request_families(state));
    out.extend(server_families(state));
    out.extend(router_families(state));
    out.extend(self_families(state));
    out.extend(state.collected.values().flatten().cloned());
    out.retain(|f| !f.is_empty());
    out
}

fn server_families(state: &State) -> Vec<Family> {
    let mut info = Family::of(&catalog::server::INFO);
    let mut values_from = Family::of(&catalog::server::VALUES_FROM);
    let mut http = Family::of(&catalog::server::HTTP_REQUESTS);
    let mut up_requests = Family::of(&catalog::server::UPSTREAM_HTTP_REQUESTS);
    let mut up_responses = Family::of(&catalog::server::UPSTREAM_HTTP_RESPONSES);
    for (key, srv) in state.servers() {
        let size = |f: fn(&crate::record::ServerArgs) -> Option<u32>| {
            srv.args
                .as_ref()
                .and_then(f)
                .map(|n| n.to_string())
                .unwrap_or_default()
        };
        let labels = view::server_labels(key, srv);
        let mut l = labels.clone();
        l.extend([
            ("tp_size", size(|a| a.tp_size)),
            ("dp_size", size(|a| a.dp_size)),
            ("pp_size", size(|a| a.pp_size)),
        ]);
        if let Some(url) = state.server_url(key, srv) {
            l.push(("url", url));
        }
        info.push(l, 1.0);
        if let Some((from, since)) = state.values_from(srv) {
            let mut l = labels.clone();
            l.push(("from", from.as_str().to_string()));
            values_from.push(l, since);
        }
        // SGLang's own names carry SGLang's labels, plus those that tell servers apart (an
        // `engine` is what upstream would add if it ran several).
        let origin = view::origin_labels(key, srv);
        let mut requests: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for (k, n) in &srv.http {
            let (method, path, status) = (k.method(), k.path(), k.status);
            let mut l = labels.clone();
            l.extend([
                ("method", method.to_string()),
                ("path", path.to_string()),
                ("status", status.to_string()),
            ]);
            http.push(l, *n as f64);
            // SGLang's own names: by endpoint and method, and by status too.
            let mut l = origin.clone();
            l.extend([
                ("endpoint", path.to_string()),
                ("method", method.to_string()),
                ("status_code", status.to_string()),
            ]);
            up_responses.push(l, *n as f64);
            *requests.entry((path, method)).or_insert(0) += n;
        }
        for ((path, method), n) in requests {
            let mut l = origin.clone();
            l.extend([
                ("endpoint", path.to_string()),
                ("method", method.to_string()),
            ]);
            up_requests.push(l, n as f64);
        }
    }
    vec![info, values_from, http, up_requests, up_responses]
}

/// What each router says of its workers ([`catalog::router`]), each worker joined to the server
/// at its address (`server` empty where none is: not covered).
fn router_families(state: &State) -> Vec<Family> {
    use crate::state::router::{address, RouterWorker};
    type Get = fn(&RouterWorker) -> Option<f64>;
    let defs: [(&catalog::FamilyDef, Get); 3] = [
        (&catalog::router::WORKER_REQUESTS_ACTIVE, |w| {
            w.requests_active
        }),
        (&catalog::router::WORKER_HEALTHY, |w| w.healthy),
        (&catalog::router::WORKER_CIRCUIT_STATE, |w| w.circuit),
    ];
    let mut out: Vec<Family> = defs.iter().map(|(d, _)| Family::of(d)).collect();
    if state.routers().is_empty() {
        return out;
    }
    let servers = state.servers_by_address();
    for (router, r) in state.routers() {
        for w in &r.workers {
            let at = address(&w.worker);
            let server = at
                .as_ref()
                .and_then(|(a, _)| servers.get(a))
                .cloned()
                .unwrap_or_default();
            let mut l = vec![
                ("server", server),
                ("router", router.clone()),
                ("worker", w.worker.clone()),
            ];
            if let Some((_, Some(rank))) = at {
                l.push(("dp_rank", rank.to_string()));
            }
            for ((_, get), f) in defs.iter().zip(&mut out) {
                if let Some(v) = get(w) {
                    f.push(l.clone(), v);
                }
            }
        }
    }
    out
}

/// How a per-source family reads a source's counters.
enum PerSource {
    /// One sample per source: this counter.
    Count(fn(&SourceStats) -> u64),
    /// One sample per source and matched line kind (kinds never matched left out).
    Matched,
    /// One sample per source and look of an unread line (stats, capacity).
    Unread,
}

/// The per-source families, in exposition order, each with what it reads.
const PER_SOURCE: [(SelfFamily, PerSource); 13] = [
    (SelfFamily::LinesRead, PerSource::Count(|s| s.lines)),
    (SelfFamily::BytesRead, PerSource::Count(|s| s.bytes)),
    (SelfFamily::LinesMatched, PerSource::Matched),
    (
        SelfFamily::LinesUnmatched,
        PerSource::Count(|s| s.unmatched),
    ),
    (SelfFamily::LinesUnread, PerSource::Unread),
    (
        SelfFamily::LinesOversized,
        PerSource::Count(|s| s.oversized),
    ),
    (
        SelfFamily::LinesIncomplete,
        PerSource::Count(|s| s.incomplete),
    ),
    (
        SelfFamily::LinesInvalidUtf8,
        PerSource::Count(|s| s.invalid_utf8),
    ),
    (SelfFamily::ReadErrors, PerSource::Count(|s| s.errors)),
    (
        SelfFamily::FieldValueErrors,
        PerSource::Count(|s| s.bad_values),
    ),
    (
        SelfFamily::LinesControlCodes,
        PerSource::Count(|s| s.control_codes),
    ),
    (
        SelfFamily::JsonLinesWithoutMessage,
        PerSource::Count(|s| s.json_without_message),
    ),
    (SelfFamily::NulRunsSkipped, PerSource::Count(|s| s.nul_runs)),
];

/// The exporter's own families (`sglang_log_exporter_*`), in exposition order; each declared
/// (name, HELP, type) in [`crate::catalog::exporter`], filled here in one pass over the sources.
fn self_families(state: &State) -> Vec<Family> {
    let mut per_source: Vec<Family> = PER_SOURCE.iter().map(|(f, _)| f.family()).collect();
    let pat = state.patterns();
    for (name, s) in &state.sources {
        for ((_, count), f) in PER_SOURCE.iter().zip(&mut per_source) {
            match count {
                PerSource::Count(get) => f.push(vec![("source", name.clone())], get(s) as f64),
                PerSource::Unread => {
                    for looks in [Looks::Stats, Looks::Capacity] {
                        let n = s.unread[looks as usize] as f64;
                        f.push(
                            vec![("source", name.clone()), ("kind", looks.as_str().into())],
                            n,
                        );
                    }
                }
                PerSource::Matched => {
                    for (k, n) in s.matched.iter().enumerate().filter(|(_, n)| **n > 0) {
                        f.push(
                            vec![
                                ("source", name.clone()),
                                ("kind", pat.lines[k].name.clone()),
                            ],
                            *n as f64,
                        );
                    }
                }
            }
        }
    }
    let mut unknown = SelfFamily::UnknownFields.family();
    for (k, n) in &state.unknown_fields {
        unknown.push(vec![("field", k.clone())], *n as f64);
    }
    let dropped = SelfFamily::SeriesDropped
        .family()
        .with(vec![], state.dropped_series as f64);
    let mut by_cap = SelfFamily::SeriesDroppedByCap.family();
    for (cap, n) in &state.dropped_by_cap {
        by_cap.push(vec![("cap", cap.label().to_string())], *n as f64);
    }
    let mut shortened = SelfFamily::LabelValuesShortened.family();
    for (label, n) in crate::label::shortened() {
        shortened.push(vec![("label", label.to_string())], n as f64);
    }
    let build = SelfFamily::BuildInfo.family().with(
        vec![
            ("branch", env!("SGLANG_LOG_EXPORTER_BRANCH").to_string()),
            ("revision", env!("SGLANG_LOG_EXPORTER_REVISION").to_string()),
            ("rustc", env!("SGLANG_LOG_EXPORTER_RUSTC").to_string()),
            ("version", env!("CARGO_PKG_VERSION").to_string()),
        ],
        1.0,
    );
    let withheld = SelfFamily::SamplesWithheld
        .family()
        .with(vec![], valid::withheld() as f64);
    let mut out = vec![build, withheld];
    out.extend(per_source);
    out.extend([unknown, dropped, by_cap, shortened]);
    for m in SelfMetric::ALL {
        let label = m.label();
        let mut f = Family::of(m.def());
        for ((n, lv), v) in &state.self_metrics {
            if *n == m {
                let labels = if label.is_empty() {
                    vec![]
                } else {
                    vec![(label, lv.clone())]
                };
                f.push(labels, *v);
            }
        }
        out.push(f);
    }
    out
}

/// `families` in the body `v` (see [`super::format`]): [`Variant::TEXT`] by the text encoder
/// below, every other variant by [`super::format::encode`], ended by `# EOF` in OpenMetrics.
///
/// Families that `v` would write under one name (a pattern file's names, or `--web.old-names`,
/// meeting once colons are underscores) are withheld, each of them, and their samples counted
/// in [`valid::withheld`]: a scrape never holds one name twice.
pub fn encode(families: &[Family], v: Variant) -> String {
    let clashes = super::format::clashes(families, v);
    if !clashes.is_empty() {
        let withheld: usize = clashes
            .iter()
            .map(|&i| families[i].samples.len() + families[i].histograms.len())
            .sum();
        valid::count_withheld(withheld as u64);
        let kept: Vec<Family> = (families.iter().enumerate())
            .filter(|(i, _)| !clashes.contains(i))
            .map(|(_, f)| f.clone())
            .collect();
        return encode(&kept, v);
    }
    encode_part(families, v, true)
}

/// `families` in the body `v`, without [`encode`]'s check: [`Variant::TEXT`] by the text
/// encoder below, every other variant by [`super::format::encode`], ended by OpenMetrics'
/// `# EOF` when `eof` (a part put in front of another body, the process families, has none).
pub fn encode_part(families: &[Family], v: Variant, eof: bool) -> String {
    if v.body() == Variant::TEXT {
        encode_text(families)
    } else {
        super::format::encode(families, v, eof)
    }
}

/// Encodes families in the Prometheus text format (version 0.0.4), through the `prometheus`
/// crate's encoder. Families without samples are skipped.
pub fn encode_text(families: &[Family]) -> String {
    let protos: Vec<proto::MetricFamily> = families
        .iter()
        .filter(|f| !f.is_empty())
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
        Kind::Histogram => proto::MetricType::HISTOGRAM,
    });
    for (labels, v) in &f.samples {
        let mut m = proto_metric(labels);
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
            // A histogram's series are in `histograms`; a stray plain sample is not encoded.
            Kind::Histogram => continue,
        }
        mf.mut_metric().push(m);
    }
    if f.kind == Kind::Histogram {
        for (labels, h) in &f.histograms {
            let mut m = proto_metric(labels);
            m.set_histogram(histogram_proto(h));
            mf.mut_metric().push(m);
        }
    }
    mf
}

/// A metric with its label pairs and no value yet.
fn proto_metric(labels: &crate::family::Labels) -> proto::Metric {
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
    m
}

/// The histogram proto: one bucket per bound with its cumulative count (the encoder adds the
/// `+Inf` bucket from the count, writes `le` with the bound's `to_string`, then `_sum` and
/// `_count`).
fn histogram_proto(h: &crate::family::Histogram) -> proto::Histogram {
    let mut p = proto::Histogram::default();
    p.set_sample_count(h.count);
    p.set_sample_sum(h.sum);
    p.set_bucket(
        h.bounds
            .iter()
            .zip(&h.cumulative)
            .map(|(&b, &c)| {
                let mut bucket = proto::Bucket::default();
                bucket.set_upper_bound(b);
                bucket.set_cumulative_count(c);
                bucket
            })
            .collect(),
    );
    p
}
