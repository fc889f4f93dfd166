//! A source's reader thread, and its supervision: a panic is counted and the reader restarted
//! where it stopped.

use super::ConfigError;
use crate::pipeline::Ingest;
use crate::state::SelfMetric;
use crate::stop::Stop;

/// Starts a source's reader thread.
pub(super) fn spawn_source(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> Result<(), ConfigError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map(drop)
        .map_err(|e| ConfigError(format!("cannot start the thread {name}: {e}")))
}

/// Runs a source's reader until it returns normally (stop requested). A panic in it (a bug of
/// ours that the per-line guard did not catch) is counted in
/// `sglang_log_exporter_source_panics_total`, the source reads down, and after a second the
/// reader is recovered (`recover`: it goes on after the last line it handed out, so nothing is
/// read twice) and run again: one input's failure never stops the others or the server.
pub(super) fn supervise<T>(
    ing: &mut Ingest,
    stop: &Stop,
    reader: &mut T,
    mut run: impl FnMut(&mut T, &mut Ingest),
    mut recover: impl FnMut(&mut T),
) {
    loop {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(reader, ing)));
        if r.is_ok() {
            return;
        }
        crate::state::lock(ing.state()).add_self(SelfMetric::SourcePanics, ing.source(), 1.0);
        ing.set_up(false);
        tracing::error!(
            source = ing.source(),
            "the reader of this source failed (a bug); restarting it where it stopped in 1 s"
        );
        if !stop.wait(std::time::Duration::from_secs(1)) {
            return;
        }
        recover(reader);
    }
}
