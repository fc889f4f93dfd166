//! Tests of the request metrics: which records count, what each histogram observes (TTFT's
//! abort rule, the derivations for older releases, PD prefill servers), labels and buckets.

use super::*;

fn record(stream: Option<bool>, m: MetaInfo) -> RequestRecord {
    RequestRecord {
        finished: true,
        stream,
        meta: Some(m),
        ..RequestRecord::default()
    }
}

fn meta(prompt: f64, completion: f64, finish: FinishKind) -> MetaInfo {
    MetaInfo {
        prompt_tokens: Some(prompt),
        completion_tokens: Some(completion),
        finish,
        ..MetaInfo::default()
    }
}

/// The families after observing `records` on a unified server.
fn families(records: &[RequestRecord], prefill: bool) -> Vec<Family> {
    let mut s = RequestStats::default();
    for r in records {
        s.observe(r, prefill);
    }
    let mut fams = request_catalog();
    s.families_into(&vec![("server", "s".to_string())], &mut fams);
    fams
}

fn family<'a>(fams: &'a [Family], name: &str) -> &'a Family {
    fams.iter().find(|f| f.name == name).unwrap()
}

/// (is_streaming label, count, sum) of each series of histogram `name`.
fn hist(fams: &[Family], name: &str) -> Vec<(Option<String>, u64, f64)> {
    family(fams, name)
        .histograms
        .iter()
        .map(|(l, h)| {
            let s = l
                .iter()
                .find(|(k, _)| *k == "is_streaming")
                .map(|(_, v)| v.clone());
            (s, h.count, h.sum)
        })
        .collect()
}

#[test]
fn skipped_records_leave_no_series() {
    let mut health = record(Some(false), meta(1.0, 1.0, FinishKind::Length));
    health.log_metrics = Some(false);
    let mut queued = record(Some(false), meta(1.0, 0.0, FinishKind::Abort));
    queued.meta.as_mut().unwrap().prompt_tokens = None;
    let mut s = RequestStats::default();
    assert!(!s.observe(&health, false));
    assert!(!s.observe(&queued, false));
    assert_eq!(s, RequestStats::default());
}

#[test]
fn buckets_are_le_and_cumulative() {
    let mut m = meta(100.0, 0.0, FinishKind::Stop);
    m.e2e_latency = Some(0.2);
    let mut m2 = m;
    m2.e2e_latency = Some(0.2000001);
    m2.prompt_tokens = Some(2_000_000.0);
    let fams = families(&[record(Some(true), m), record(Some(true), m2)], false);
    let (_, e2e) = &family(&fams, "sglang:e2e_request_latency_seconds").histograms[0];
    // 0.2 lies in le="0.2" (upper bounds are inclusive); 0.2000001 in le="0.4".
    assert_eq!(&e2e.cumulative[..3], &[0, 1, 2]);
    let (_, prompt) = &family(&fams, "sglang:prompt_tokens_histogram").histograms[0];
    // 2e6 is above the last bound: only in +Inf (the count).
    assert_eq!(
        (prompt.cumulative[0], *prompt.cumulative.last().unwrap()),
        (1, 1)
    );
    assert_eq!((prompt.count, prompt.sum), (2, 2_000_100.0));
}

#[test]
fn ttft_of_aborts_only_after_an_earlier_output() {
    let abort = |stream, completion| {
        let mut m = meta(10.0, completion, FinishKind::Abort);
        m.first_token_latency = Some(0.5);
        m.e2e_latency = Some(1.0);
        record(Some(stream), m)
    };
    let fams = families(
        &[
            abort(true, 0.0),   // the abort was the first output
            abort(true, 1.0),   // streamed a token first
            abort(false, 49.0), // no intermediate output yet
            abort(false, 50.0), // one intermediate output
        ],
        false,
    );
    let got = hist(&fams, "sglang:time_to_first_token_seconds");
    assert_eq!(
        got,
        [
            (Some("false".into()), 1, 0.5),
            (Some("true".into()), 1, 0.5)
        ]
    );
    // Aborts never feed time per output token.
    assert!(
        family(&fams, "sglang:request_time_per_output_token_seconds")
            .histograms
            .is_empty()
    );
}

#[test]
fn time_per_output_token_and_pd_prefill() {
    let mut m = meta(10.0, 11.0, FinishKind::Length);
    m.first_token_latency = Some(0.5);
    m.e2e_latency = Some(1.5);
    let r = record(Some(false), m);
    let fams = families(&[r], false);
    assert_eq!(
        hist(&fams, "sglang:request_time_per_output_token_seconds"),
        [(Some("false".into()), 1, 0.1)]
    );
    // A PD prefill server observes neither TTFT nor time per output token.
    let fams = families(&[r], true);
    assert!(family(&fams, "sglang:time_to_first_token_seconds")
        .histograms
        .is_empty());
    assert!(
        family(&fams, "sglang:request_time_per_output_token_seconds")
            .histograms
            .is_empty()
    );
    assert_eq!(
        family(&fams, "sglang:e2e_request_latency_seconds")
            .histograms
            .len(),
        1
    );
}

#[test]
fn ttft_derived_for_older_releases() {
    let base = |retractions_key| {
        let mut m = meta(10.0, 11.0, FinishKind::Stop);
        m.e2e_latency = Some(3.0);
        m.decode_throughput = Some(5.0);
        m.forward_entry_time = Some(1.7e9);
        m.num_retractions_key = retractions_key;
        m
    };
    // v0.5.12-v0.5.20: e2e - (n - 1) / throughput, and 1 / throughput per token.
    let l = latencies(&base(true));
    assert_eq!((l.ttft, l.tpot), (Some(1.0), Some(0.2)));
    // v0.5.10-v0.5.11: e2e - n / throughput, no time per token.
    let l = latencies(&base(false));
    assert_eq!((l.ttft, l.tpot), (Some(3.0 - 11.0 / 5.0), None));
    // v0.5.5-v0.5.9: prefill finished - received.
    let mut m = meta(10.0, 11.0, FinishKind::Stop);
    m.prefill_finished_ts = Some(1000.25);
    m.request_received_ts = Some(1000.0);
    assert_eq!(latencies(&m).ttft, Some(0.25));
    // A derivation below 0 is dropped; nothing to derive from is nothing.
    m.request_received_ts = Some(1001.0);
    assert_eq!(latencies(&m), Latencies::default());
    assert_eq!(
        latencies(&meta(1.0, 1.0, FinishKind::Stop)),
        Latencies::default()
    );
}

#[test]
fn queue_time_rules() {
    let mut m = meta(1.0, 1.0, FinishKind::Stop);
    m.queue_time = Some(0.5);
    m.reasoning_tokens_key = true;
    // v0.5.10+: only with forward_entry_time (a request that never ran has 0 or a negative
    // queue time).
    assert_eq!(queue_time(&m), None);
    m.forward_entry_time = Some(1.7e9);
    assert_eq!(queue_time(&m), Some(0.5));
    // Before v0.5.10: when not negative.
    let mut m = meta(1.0, 1.0, FinishKind::Stop);
    m.queue_time = Some(-3.0);
    assert_eq!(queue_time(&m), None);
    m.queue_time = Some(0.0);
    assert_eq!(queue_time(&m), Some(0.0));
}

#[test]
fn labels_of_the_counters() {
    let mut details = meta(100.0, 7.0, FinishKind::Stop);
    details.cached_tokens = Some(96.0);
    details.cached_details = Some([64.0, 32.0, 0.0]);
    let mut total = meta(50.0, 5.0, FinishKind::Stop);
    total.cached_tokens = Some(40.0);
    let mut so = record(None, total);
    so.structured_output = true;
    let mut spec = meta(1.0, 1.0, FinishKind::Stop);
    spec.spec_verify_ct = Some(4.0);
    let fams = families(
        &[record(Some(true), details), so, record(Some(false), spec)],
        false,
    );
    let values = |name: &str| {
        family(&fams, name)
            .samples
            .iter()
            .map(|(l, v)| {
                (
                    l.iter()
                        .skip(1)
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                    *v,
                )
            })
            .collect::<Vec<_>>()
    };
    // The record that does not tell `stream` has no is_streaming label.
    assert_eq!(
        values("sglang:num_requests_total"),
        [
            ("is_streaming=false".into(), 1.0),
            ("is_streaming=true".into(), 1.0),
            (String::new(), 1.0)
        ]
    );
    assert_eq!(
        values("sglang:cached_tokens_total"),
        [
            ("cache_source=device".into(), 64.0),
            ("cache_source=host".into(), 32.0),
            ("cache_source=total".into(), 40.0)
        ]
    );
    assert_eq!(
        values("sglang:num_so_requests_total"),
        [(String::new(), 1.0)]
    );
    assert_eq!(
        values("sglang:spec_verify_calls_total"),
        [(String::new(), 4.0)]
    );
    assert_eq!(
        values("sglang:generation_tokens_total")[1],
        ("is_streaming=true".into(), 7.0)
    );
    let (_, uncached) = &family(&fams, "sglang:uncached_prompt_tokens_histogram").histograms[0];
    assert_eq!(uncached.sum, 4.0 + 10.0 + 1.0);
}
