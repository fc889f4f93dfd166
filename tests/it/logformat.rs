//! `--log.format text|logfmt|json`: the exporter's own messages on stderr.

use crate::common::{sample, wait_log, Exporter};

fn log_of(format: &str) -> Vec<String> {
    let mut e = Exporter::start(&[
        "--gpu.disable",
        "--log.format",
        format,
        sample("pd-decode-session.log").to_str().unwrap(),
    ]);
    // Listening comes a moment before the line saying so.
    wait_log(&e.log_lines(), "serving metrics", 20);
    let _ = e.child.kill();
    let _ = e.child.wait();
    e.stderr_to_end().lines().map(String::from).collect()
}

#[test]
fn json_lines_are_objects_with_ts_level_msg_and_fields() {
    let lines = log_of("json");
    let serving = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))
        })
        .find(|v| v["msg"] == "serving metrics")
        .unwrap_or_else(|| panic!("{lines:?}"));
    let o = serving.as_object().unwrap();
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["address", "level", "msg", "path", "ts"]);
    assert_eq!(o["level"], "info");
    assert_eq!(o["path"], "/metrics");
    assert!(o["address"].as_str().unwrap().starts_with("127.0.0.1:"));
    let ts = o["ts"].as_str().unwrap();
    // In the order exporters print them: ts, level, msg, then the fields.
    let line = lines
        .iter()
        .find(|l| l.contains("serving metrics"))
        .unwrap();
    assert!(
        line.starts_with(&format!(
            r#"{{"ts":"{ts}","level":"info","msg":"serving metrics","#
        )),
        "{line}"
    );
    assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{ts}");
}

#[test]
fn logfmt_lines_are_key_value_pairs() {
    let lines = log_of("logfmt");
    let l = lines
        .iter()
        .find(|l| l.contains("serving metrics"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    let ts = l
        .strip_prefix("ts=")
        .and_then(|r| r.split(' ').next())
        .unwrap();
    assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{l}");
    let rest = l.split_once(' ').unwrap().1;
    let want = "level=info msg=\"serving metrics\" address=127.0.0.1:";
    assert!(rest.starts_with(want), "{l}");
    assert!(rest.ends_with(" path=/metrics"), "{l}");
}

#[test]
fn text_is_the_default() {
    let mut e = Exporter::start(&[
        "--gpu.disable",
        sample("pd-decode-session.log").to_str().unwrap(),
    ]);
    wait_log(&e.log_lines(), "serving metrics", 20);
    let _ = e.child.kill();
    let _ = e.child.wait();
    let log = e.stderr_to_end();
    let l = log.lines().find(|l| l.contains("serving metrics")).unwrap();
    // `2026-12-01T21:06:59.501027Z  INFO serving metrics address=… path=/metrics`
    let (ts, rest) = l.split_once("  ").unwrap();
    assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{l}");
    assert!(
        rest.starts_with("INFO serving metrics address=127.0.0.1:"),
        "{l}"
    );
    assert_eq!(
        log_of("text")
            .iter()
            .filter(|l| l.contains("serving metrics"))
            .count(),
        1
    );
}
