//! `Patterns::from_yaml`: a small valid file, and each kind of bad file refused with its own
//! message.

use super::*;

/// A small valid pattern file: one decode line, one fact line with a group field, an alias.
const GOOD: &str = r##"
prefix: '\[(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9]) (?P<time>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?P<tags>(?: [A-Z]+[0-9]+)*)\]'
rank_tags:
  TP: tp
  MOE_DP: moe_dp
lines:
  - name: decode
    class: decode
    literal: "Decode batch"
    regex: 'Decode batch, '
    requires: ["#running-req"]
  - name: pool
    class: fact
    literal: "KV pool"
    regex: 'KV pool size=(?P<size>[0-9]+)'
fields:
  "#running-req": {metric: running}
  size: {metric: pool}
  skipped: {ignore: true}
line_fields:
  decode:
    "#running-req": {metric: running_alt, signed: true}
metrics:
  running: {name: "sglang:num_running_reqs", kind: gauge, help: "Running.", activity: true}
  running_alt: {name: running_alt, kind: gauge, help: "Alt."}
  pool: {name: pool_tokens, kind: gauge, help: "Pool."}
  pool_k: {name: pool_ktokens, kind: gauge, help: "Pool in k.", from: pool, scale: 0.001}
"##;

/// The error message of `GOOD` with `from` replaced by `to` (which must occur once).
fn refused(from: &str, to: &str) -> String {
    assert_eq!(GOOD.matches(from).count(), 1, "{from:?}");
    match Patterns::from_yaml(&GOOD.replacen(from, to, 1)) {
        Ok(_) => panic!("accepted with {from:?} -> {to:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_good_file_compiles_as_written() {
    let p = Patterns::from_yaml(GOOD).unwrap();
    assert_eq!(p.lines.len(), 2);
    assert_eq!(p.literals, ["Decode batch", "KV pool"]);
    assert_eq!(p.kind_literal, [0, 1]);
    // Longest tag first.
    assert_eq!(
        p.rank_tags,
        [
            ("MOE_DP".to_string(), RankTag::MoeDp),
            ("TP".to_string(), RankTag::Tp)
        ]
    );
    let ids: Vec<&str> = p.metrics.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["running", "running_alt", "pool", "pool_k"]);
    assert_eq!(p.metrics[3].alias_of, [2]);
    assert_eq!(p.metric_by_id("pool_k"), Some(3));
    assert_eq!(p.metric_by_id("nope"), None);
    // The line override wins on its line; the group field is bound to its target.
    let (decode, pool) = (&p.lines[0], &p.lines[1]);
    let running_alt = FieldTarget::Metric {
        id: 1,
        scale: 1.0,
        sum: false,
        signed: true,
    };
    assert_eq!(p.field(decode, "#running-req"), Some(running_alt));
    assert_eq!(
        p.field(pool, "#running-req"),
        Some(FieldTarget::Metric {
            id: 0,
            scale: 1.0,
            sum: false,
            signed: false,
        })
    );
    assert_eq!(p.field(pool, "skipped"), Some(FieldTarget::Ignore));
    assert_eq!(p.field(pool, "unknown"), None);
    assert_eq!(
        pool.group_fields,
        [(
            1,
            FieldTarget::Metric {
                id: 2,
                scale: 1.0,
                sum: false,
                signed: false,
            }
        )]
    );
    assert_eq!(decode.separators, [", "]);
    assert_eq!(decode.kv, [": "]);
}

#[test]
fn yaml_of_the_wrong_shape_is_refused() {
    let e = refused("  - name: pool\n", "  - nme: pool\n");
    assert!(
        e.starts_with("patterns file is not valid: lines[1]: unknown field `nme`"),
        "{e}"
    );
    let e = refused(
        "kind: gauge, help: \"Pool.\"",
        "kind: histogram, help: \"Pool.\"",
    );
    assert!(
        e.starts_with("patterns file is not valid: metrics.pool.kind: unknown variant `histogram`"),
        "{e}"
    );
}

/// Long because it is a table: 15 bad files, each with the message it must get.
#[test]
fn each_inconsistency_is_refused_with_its_message() {
    let cases: [(&str, &str, &str); 15] = [
        (
            "  running_alt: {name: running_alt,",
            "  running: {name: running_alt,",
            "metric running is defined twice",
        ),
        (
            "{name: pool_tokens,",
            "{name: 9pool,",
            "metric pool: \"9pool\" is not a valid Prometheus metric name",
        ),
        (
            "from: pool, scale",
            "from: nothere, scale",
            "metric pool_k: from \"nothere\" is not a metric",
        ),
        (
            "help: \"Alt.\"}",
            "help: \"Alt.\", scale: 2}",
            "metric running_alt: scale is only for an alias (from:)",
        ),
        (
            "help: \"Alt.\"}",
            "help: \"Alt.\", default: 0}",
            "metric running_alt: default and default_on go together",
        ),
        (
            "size: {metric: pool}",
            "size: {metric: poool}",
            "field \"size\" refers to undefined metric \"poool\"",
        ),
        (
            "size: {metric: pool}",
            "size: {metric: pool, scale: 0}",
            "field \"size\": scale must be a positive number",
        ),
        (
            "skipped: {ignore: true}",
            "skipped: {sum: true}",
            "field \"skipped\" names no metric and is not ignored",
        ),
        (
            "TP: tp",
            "TP: tensor",
            "rank tag TP: unknown rank \"tensor\" (dp, pp, attn_cp, moe_dp, tp, ep)",
        ),
        (
            "TP: tp",
            "Tp: tp",
            "rank tag \"Tp\": use upper-case letters and _ only",
        ),
        (
            "literal: \"KV pool\"",
            "literal: \"\"",
            "line pool: the literal must not be empty",
        ),
        (
            "regex: 'Decode batch, '",
            "regex: 'Decode batch, '\n    separators: [\"\"]",
            "line decode: separators must not be empty",
        ),
        (
            "requires: [\"#running-req\"]",
            "requires: [\"#nope\"]",
            "line decode: required field \"#nope\" is not a known field of this line",
        ),
        (
            "size=(?P<size>[0-9]+)",
            "size=(?P<sise>[0-9]+)",
            "line pool: group \"sise\" is not a known field",
        ),
        (
            "size=(?P<size>[0-9]+)",
            "size=(?P<size>\\d+)",
            "regex of line pool: \\d matches every Unicode digit; write [0-9]",
        ),
    ];
    for (from, to, want) in cases {
        assert_eq!(
            refused(from, to),
            format!("patterns file: {want}"),
            "{from:?} -> {to:?}"
        );
    }
    // An alias of a metric of another kind.
    let e = refused(
        "  pool_k: {name: pool_ktokens, kind: gauge,",
        "  pool_k: {name: pool_ktokens, kind: counter,",
    );
    assert_eq!(
        e,
        "patterns file: metric pool_k: from \"pool\" must be a metric of the same kind that is no alias"
    );
}

#[test]
fn regexes_that_do_not_compile_name_their_entry() {
    let e = refused("regex: 'Decode batch, '", "regex: 'Decode (batch, '");
    assert!(
        e.starts_with("patterns file: regex of line decode does not compile: "),
        "{e}"
    );
    let e = refused("\\[(?P<date>", "\\[((?P<date>");
    assert!(
        e.starts_with("patterns file: regex of prefix does not compile: "),
        "{e}"
    );
}

#[test]
fn prefix_shapes_are_checked() {
    let (time, short) = (
        "(?P<time>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])",
        "(?P<time>[0-9]?[0-9]:[0-9][0-9]:[0-9][0-9])",
    );
    assert_eq!(
        refused(time, short),
        "patterns file: prefix: group time must match 8 to 8 ASCII characters (it allows Some(7) to Some(8) bytes)"
    );
    assert_eq!(
        refused(time, "(?P<clock>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])"),
        "patterns file: prefix: the regex needs a group named time"
    );
    assert_eq!(
        refused(
            "(?P<date>[0-9]{4}-",
            "(?P<date>[0-9]{2,4}-"
        ),
        "patterns file: prefix: group date must match 10 to 10 ASCII characters (it allows Some(8) to Some(10) bytes)"
    );
}

#[test]
fn more_than_64_literals_are_refused() {
    // 65: the two of GOOD and 63 more.
    let mut lines = String::new();
    for i in 0..63 {
        lines.push_str(&format!(
            "  - name: l{i}\n    class: fact\n    literal: \"lit{i}\"\n    regex: 'lit{i} '\n"
        ));
    }
    let text = GOOD.replacen("lines:\n", &format!("lines:\n{lines}"), 1);
    let e = Patterns::from_yaml(&text).unwrap_err().to_string();
    assert_eq!(
        e,
        "patterns file: 65 distinct literals; at most 64 are supported"
    );
    // 64 are fine (the two of GOOD and 62 more).
    let mut lines = String::new();
    for i in 0..62 {
        lines.push_str(&format!(
            "  - name: l{i}\n    class: fact\n    literal: \"lit{i}\"\n    regex: 'lit{i} '\n"
        ));
    }
    let text = GOOD.replacen("lines:\n", &format!("lines:\n{lines}"), 1);
    assert_eq!(Patterns::from_yaml(&text).unwrap().literals.len(), 64);
}

#[test]
fn the_embedded_file_compiles() {
    let p = Patterns::embedded().unwrap();
    assert!(p.literals.len() <= 64);
    assert_eq!(
        p.metrics.len(),
        p.metrics
            .iter()
            .map(|m| &m.id)
            .collect::<std::collections::HashSet<_>>()
            .len()
    );
}

#[test]
fn a_metric_name_given_twice_or_reserved_by_the_exporter_is_refused() {
    // Two ids, one name.
    let e = refused("pool: {name: pool_tokens,", "pool: {name: running_alt,");
    assert!(
        e.contains("metric pool: name \"running_alt\" is metric running_alt's already"),
        "{e}"
    );
    // A name of the registry's (the rank extras, the exporter's own).
    let e = refused("pool: {name: pool_tokens,", "pool: {name: sglang_idle,");
    assert!(
        e.contains("metric pool: name \"sglang_idle\" meets a family of the exporter's own"),
        "{e}"
    );
    let e = refused(
        "running_alt: {name: running_alt,",
        "running_alt: {name: sglang_log_exporter_lines_read_total,",
    );
    assert!(e.contains("meets a family of the exporter's own"), "{e}");
    // Names that meet once colons are underscores (the trial of issue 36's step: a file that
    // named a metric `sglang_num_running_reqs` beside `sglang:num_running_reqs` loaded, and
    // `--web.names underscores` wrote one series twice).
    let e = refused(
        "pool: {name: pool_tokens,",
        "pool: {name: sglang_num_running_reqs,",
    );
    assert!(
        e.contains("name \"sglang_num_running_reqs\" is metric running's already"),
        "{e}"
    );
    let e = refused("pool: {name: pool_tokens,", "pool: {name: \"sglang:idle\",");
    assert!(e.contains("meets a family of the exporter's own"), "{e}");
    // Every name a family writes (the second trial): a histogram's samples, a counter's
    // OpenMetrics name without `_total`, a renamed family's old name.
    for (name, other) in [
        (
            "sglang:e2e_request_latency_seconds_count",
            "sglang:e2e_request_latency_seconds",
        ),
        (
            "sglang_time_to_first_token_seconds_bucket",
            "sglang:time_to_first_token_seconds",
        ),
        ("sglang_prefill_batches", "sglang_prefill_batches_total"),
        (
            "sglang_max_running_requests",
            "the old name of sglang_running_requests_limit",
        ),
    ] {
        let e = refused(
            "pool: {name: pool_tokens,",
            &format!("pool: {{name: \"{name}\","),
        );
        assert!(
            e.contains("meets a family of the exporter's own") && e.contains(other),
            "{e}"
        );
    }
    // A counter whose OpenMetrics name is another metric's name.
    let e = refused(
        "running_alt: {name: running_alt, kind: gauge,",
        "running_alt: {name: \"sglang:num_running_reqs_total\", kind: counter,",
    );
    assert!(e.contains("is metric running's already"), "{e}");
}
