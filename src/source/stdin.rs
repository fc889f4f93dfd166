//! Standard input (`-`), e.g. `journalctl -u sglang-decode -f -o json | sglang-log-exporter -`.
//! JSON journal records are recognised per line (see [`crate::pipeline::framing`]).

use std::io::Read;

use super::linebuf::LineBuf;
use super::LineSink;

/// Reads `input` to its end, feeding whole lines to `ingest` (a last line without `\n` is
/// dropped and counted). A read error ends the input with a warning. The source reads up
/// (`sglang_log_exporter_source_up` 1) while open and down after its end: a `journalctl -f`
/// feeding the pipe has died. Counters are handed on after every read, so they move while a
/// slow pipe (`journalctl -f`) trickles lines, not only at its end.
pub fn read_to_end<R: Read>(input: &mut R, ingest: &mut impl LineSink, max_line: usize) {
    let mut lb = LineBuf::new(max_line);
    ingest.up(true);
    loop {
        match lb.fill(input, |e| ingest.event(e)) {
            Ok(0) => break,
            Ok(n) => {
                ingest.bytes(n);
                ingest.flush();
            }
            Err(e) => {
                ingest.error();
                tracing::warn!(source = %ingest.source(), "reading failed: {e}; treating it as the end of the input");
                break;
            }
        }
    }
    lb.flush_partial(|e| ingest.event(e));
    ingest.input_ended();
    ingest.flush();
    ingest.up(false);
}
