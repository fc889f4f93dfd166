//! The main process's `server_args=ServerArgs(...)` line: the Python repr of SGLang's
//! `ServerArgs` dataclass, printed at start-up by `launch_server` (`python/sglang/srt/entrypoints/
//! http_server.py`, `server_args.py`). Only the few fields the exporter uses are read.

use crate::record::ServerArgs;

/// Reads the few `ServerArgs(...)` fields we use from the repr SGLang prints
/// (`key='text'`, `key=123`, `key=None`, `key=True`), ignoring the rest.
pub fn parse_server_args(s: &str) -> ServerArgs {
    let mut out = ServerArgs::default();
    let mut model_path = None;
    let mut served = None;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // key
        let ks = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let key = &s[ks..i];
        if i >= b.len() || b[i] != b'=' {
            // not `key=`: skip to the next top-level `, `
            i = skip_value(b, i);
            continue;
        }
        i += 1;
        let vs = i;
        i = skip_value(b, i);
        let raw = s[vs..i.min(b.len())].trim_end_matches([',', ' ', ')']);
        let text = raw
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .or_else(|| raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')));
        let num = || raw.parse::<u32>().ok();
        match key {
            "model_path" => model_path = text.map(str::to_string),
            "served_model_name" => served = text.map(str::to_string),
            "disaggregation_mode" => out.disaggregation_mode = text.map(str::to_string),
            "tp_size" => out.tp_size = num(),
            "dp_size" => out.dp_size = num(),
            "pp_size" => out.pp_size = num(),
            "nnodes" => out.nnodes = num(),
            "node_rank" => out.node_rank = num(),
            "base_gpu_id" => out.base_gpu_id = num(),
            "gpu_id_step" => out.gpu_id_step = num(),
            "enable_dp_attention" => out.enable_dp_attention = Some(raw == "True"),
            _ => {}
        }
    }
    out.model_name = served.or(model_path);
    out
}

/// Index just past the value starting at `i` (and its `, ` separator), honouring quotes and
/// brackets so that `a='x, y'` and `l=[1, 2]` stay whole.
fn skip_value(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                b'\'' | b'"' => quote = Some(c),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b',' if depth <= 0 => {
                    i += 1;
                    while i < b.len() && b[i] == b' ' {
                        i += 1;
                    }
                    return i;
                }
                _ => {}
            },
        }
        i += 1;
    }
    i
}
