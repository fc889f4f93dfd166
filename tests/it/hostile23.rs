//! Faults of the 23rd hostile pass (`/tmp/h23/`), each with the input that showed it:
//! label values of any length (F3), restored ranks crowding out the inputs' own (F4), and the
//! memory a long partial last line held per followed file (F5).

use std::path::Path;

use crate::common::{append, once, parse_exposition, Exporter, Sample};

const STATS: &str = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0";

fn values<'a>(s: &'a [Sample], name: &str) -> Vec<&'a Sample> {
    s.iter().filter(|x| x.name == name).collect()
}

fn label<'a>(s: &'a Sample, name: &str) -> &'a str {
    s.labels
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// F3: 64 kubectl `--prefix` lines naming pods of 200 KB (each line under the 1 MiB cap, 64
/// engines under the engine cap) made a 333 MB exposition and 1 GB of RSS. Each engine label is
/// now its first 239 bytes, `~` and a hash of the whole: 64 series apart, a small exposition.
#[test]
fn f3_engine_labels_of_200_kb_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("s.log");
    let pods = "p".repeat(200_000);
    let text: String = (0..64)
        .map(|e| format!("[pod/{pods}{e}/sglang] {STATS}\n"))
        .collect();
    std::fs::write(&log, text).unwrap();
    let out = once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        log.to_str().unwrap(),
    ]);
    assert!(out.len() < 1_000_000, "{} bytes", out.len());
    let s = parse_exposition(&out);
    assert!(s
        .iter()
        .all(|x| x.labels.iter().all(|(_, v)| v.len() <= 256)));
    let running = values(&s, "sglang:num_running_reqs");
    assert_eq!(running.len(), 64);
    assert!(running.iter().all(|x| x.value == 1.0));
    let engines: Vec<&str> = running.iter().map(|x| label(x, "engine")).collect();
    let head = format!("pod/{}", "p".repeat(235));
    assert!(engines.contains(&format!("{head}~43d3c9728fe5c1d2").as_str()));
    assert!(engines.contains(&format!("{head}~058cc8104aa33e0f").as_str()));
    let shortened = values(&s, "sglang_log_exporter_label_values_shortened_total");
    assert_eq!(shortened.len(), 1);
    assert_eq!(
        (label(shortened[0], "label"), shortened[0].value),
        ("engine", 64.0)
    );
    assert_eq!(
        values(&s, "sglang_log_exporter_series_dropped_total")[0].value,
        0.0
    );
}

/// F3 (state file, `/tmp/h23/st1` case b): a state file holding a server with a 40 MB name made
/// an 80 MB exposition until the server expired. Its name (12 MB here, under the file's 16 MiB
/// limit) is bounded as it is restored.
#[test]
fn f3_a_12_mb_server_name_in_the_state_file_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("st");
    std::fs::create_dir(&state).unwrap();
    let name = "s".repeat(12_000_000);
    std::fs::write(
        state.join("state.json"),
        format!(
            r#"{{"version":1,"journal_cursors":{{}},"servers":[{{"server":"{name}","engine":"","args":null,"facts":{{"kv_pool_capacity_tokens":5.0}},"last_seen":1.0,"ranks":[]}}]}}"#
        ),
    )
    .unwrap();
    drop(name);
    let log = dir.path().join("s.log");
    std::fs::write(&log, format!("{STATS}\n")).unwrap();
    let e = Exporter::start(&[
        "--gpu.disable",
        "--state.dir",
        state.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    let m = e.scrape_until(30, |m| m.contains("sglang_kv_pool_capacity_tokens{"));
    assert!(m.len() < 100_000, "{} bytes", m.len());
    let s = parse_exposition(&m);
    let cap = values(&s, "sglang_kv_pool_capacity_tokens");
    assert_eq!(cap.len(), 1);
    assert_eq!(
        label(cap[0], "server"),
        format!("{}~8b747af1ec68a225", "s".repeat(239))
    );
    assert_eq!(cap[0].value, 5.0);
}

/// The F4 state file: 16 servers of 2,000 ranks, none of them named by an input.
fn crowded_state(dir: &Path) {
    let rank = |t: u32| {
        format!(
            r#"{{"dp":null,"pp":null,"attn_cp":null,"moe_dp":null,"tp":{t},"ep":null,"facts":{{"kv_pool_capacity_tokens":1000.0}}}}"#
        )
    };
    let ranks: Vec<String> = (0..2000).map(rank).collect();
    let ranks = ranks.join(",");
    let servers: Vec<String> = (0..16)
        .map(|s| {
            format!(
                r#"{{"server":"s{s}","engine":"","args":null,"facts":{{}},"last_seen":1.0,"ranks":[{ranks}]}}"#
            )
        })
        .collect();
    std::fs::write(
        dir.join("state.json"),
        format!(
            r#"{{"version":1,"journal_cursors":{{}},"servers":[{}]}}"#,
            servers.join(",")
        ),
    )
    .unwrap();
}

/// F4: the restored ranks took the whole budget of 2,048 ranks and the input's own TP0 was
/// refused (`series_dropped_by_cap_total{cap="ranks_total"} 1`), in `--once` and live, and
/// stayed missing after the restored servers expired. A restored rank no input names now
/// gives way to it.
#[test]
fn f4_restored_ranks_give_way_to_the_inputs_own() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("st");
    std::fs::create_dir(&state).unwrap();
    crowded_state(&state);
    let log = dir.path().join("s.log");
    std::fs::write(&log, format!("{STATS}\n")).unwrap();
    let st = state.to_str().unwrap();
    let out = once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--state.dir",
        st,
        log.to_str().unwrap(),
    ]);
    let s = parse_exposition(&out);
    let running = values(&s, "sglang:num_running_reqs");
    assert_eq!(running.len(), 1);
    assert_eq!((label(running[0], "server"), running[0].value), ("s", 1.0));
    assert_eq!(
        values(&s, "sglang_log_exporter_series_dropped_total")[0].value,
        0.0
    );
    assert!(values(&s, "sglang_log_exporter_series_dropped_by_cap_total").is_empty());
    assert_eq!(
        values(&s, "sglang_log_exporter_restored_gave_way_total")[0].value,
        1.0
    );
    // Live: the input's rank at once, and still there after the restored servers expired.
    let e = Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--input.expiry",
        "2s",
        "--state.dir",
        st,
        log.to_str().unwrap(),
    ]);
    let m = e.scrape_until(20, |m| m.contains("sglang:num_running_reqs{server=\"s\""));
    assert!(
        m.contains("sglang_log_exporter_series_dropped_total 0"),
        "{m}"
    );
    assert!(m.contains("server=\"s0\""));
    let m = e.scrape_until(20, |m| !m.contains("server=\"s0\""));
    assert!(m.contains("sglang:num_running_reqs{server=\"s\""), "{m}");
}

/// F5: a followed file ending in a 1,000,000-byte line with no newline held that line in
/// memory (256 such files: 297 MB). It is now let go and read again when it ends: the line and
/// the next are read, every byte counted once, nothing counted as cut. (The memory held is
/// asserted in `source::file`'s tests and measured in the README's Bounds.)
#[test]
fn f5_a_long_partial_line_is_read_whole_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("f0.log");
    std::fs::write(&log, format!("{STATS}\n{}", "x".repeat(1_000_000))).unwrap();
    let e = Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--poll-interval",
        "100ms",
        log.to_str().unwrap(),
    ]);
    let src = log.to_str().unwrap();
    let read = format!("sglang_log_exporter_bytes_read_total{{source=\"{src}\"}} 1000101");
    e.scrape_until(20, |m| m.contains(&read));
    append(
        &log,
        format!(
            "xyz\n{}\n",
            STATS
                .replace("TP0", "TP1")
                .replace("running-req: 1", "running-req: 7")
        )
        .as_bytes(),
    );
    let size = std::fs::metadata(&log).unwrap().len();
    let m = e.scrape_until(20, |m| {
        m.contains("sglang:num_running_reqs{server=\"f0\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"1\"")
    });
    let s = parse_exposition(&m);
    let of = |name: &str| values(&s, name)[0].value;
    assert_eq!(of("sglang_log_exporter_bytes_read_total"), size as f64);
    assert_eq!(of("sglang_log_exporter_lines_read_total"), 3.0);
    assert_eq!(of("sglang_log_exporter_lines_unmatched_total"), 1.0);
    assert_eq!(of("sglang_log_exporter_lines_incomplete_total"), 0.0);
    assert_eq!(of("sglang_log_exporter_lines_oversized_total"), 0.0);
    let running: Vec<f64> = values(&s, "sglang:num_running_reqs")
        .iter()
        .map(|x| x.value)
        .collect();
    assert_eq!(running, [1.0, 7.0]);
}
