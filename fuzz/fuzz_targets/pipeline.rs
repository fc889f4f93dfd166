//! Every line of the input through the whole pipeline (framing, cleaning, UTF-8, parse) and
//! into a state; then the exposition. libFuzzer's panic hook aborts on any panic, also one the
//! pipeline would catch, so a crash here is a bug the exporter would only count.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use sglang_log_exporter::export::metrics::families;
use sglang_log_exporter::parse::patterns::Patterns;
use sglang_log_exporter::parse::Parser;
use sglang_log_exporter::pipeline::{Outcome, Pipeline};
use sglang_log_exporter::state::{SourceDelta, State, StateConfig};

fn patterns() -> Arc<Patterns> {
    static P: OnceLock<Arc<Patterns>> = OnceLock::new();
    P.get_or_init(|| Arc::new(Patterns::embedded().unwrap())).clone()
}

fuzz_target!(|data: &[u8]| {
    let pat = patterns();
    let cfg = StateConfig {
        max_servers: 3,
        max_ranks: 4,
        max_ranks_total: 6,
        ..StateConfig::default()
    };
    let mut st = State::new(pat.clone(), cfg);
    let max = if data.first().is_some_and(|b| b & 1 == 1) { 64 } else { 1 << 20 };
    let mut p = Pipeline::new(Parser::new(pat), max, None);
    let mut d = SourceDelta::default();
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        match p.run(line, &mut d) {
            Outcome::Panicked => panic!("the pipeline panicked"),
            Outcome::Parsed {
                rec,
                unit,
                realtime,
                ..
            } => {
                assert!(rec.values.iter().all(|(_, v)| v.is_finite()));
                assert!(realtime.is_none_or(f64::is_finite));
                let ts = Some(1_780_480_800.0 + i as f64);
                st.apply("src", unit.unwrap_or("srv"), &rec, ts);
            }
            Outcome::Unmatched { text: t, .. } => assert!(!t.contains(['\x1b', '\r'])),
            Outcome::Skipped => {}
        }
    }
    for f in families(&st, 1_780_480_800.0 + 60.0) {
        for (_, v) in &f.samples {
            assert!(v.is_finite(), "{} = {v}", f.name);
        }
    }
});
