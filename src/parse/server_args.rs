//! The main process's ServerArgs dump, printed once at start-up. Two shapes:
//! - to v0.5.18, `server_args=ServerArgs(model_path='m', tp_size=8, ...)`: the repr of SGLang's
//!   `ServerArgs` dataclass (`launch_server`, `python/sglang/srt/entrypoints/http_server.py`,
//!   `server_args.py`);
//! - v0.5.19 on, `server_args={'model_path': 'm', 'tp_size': 8, ...}`: the repr of a resolved,
//!   redacted dict (`python/sglang/srt/entrypoints/engine.py`), with quoted keys, `None`, `True`,
//!   nested dicts and lists.
//!
//! Only the few top-level fields the exporter uses are read; nested values are skipped whole.

use crate::record::ServerArgs;

/// Reads the few fields we use from either repr (`key='text'`, `key=123`, `key=None`,
/// `key=True`, or `'key': 'text'`, `'key': 123`, ...), ignoring the rest. `s` is the text after
/// `ServerArgs(` or `{`; a field that cannot be read stays `None`.
pub fn parse_server_args(s: &str) -> ServerArgs {
    let mut out = ServerArgs::default();
    let mut model_path = None;
    let mut served = None;
    let mut attn_dp = None;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let Some((key, vs)) = read_key(s, i) else {
            // not a key: skip to the next top-level `, `
            i = skip_value(b, i);
            continue;
        };
        i = skip_value(b, vs);
        let raw = s[vs..i.min(b.len())].trim_end_matches([',', ' ', ')', '}']);
        let text = py_str(raw);
        let text = text.as_deref();
        let num = || raw.parse::<u32>().ok();
        match key {
            "model_path" => model_path = text.map(str::to_string),
            "served_model_name" => served = text.map(str::to_string),
            "disaggregation_mode" => out.disaggregation_mode = text.map(str::to_string),
            "tp_size" => out.tp_size = num(),
            "dp_size" => out.dp_size = num(),
            "attn_dp_size" => attn_dp = num(),
            "pp_size" => out.pp_size = num(),
            "nnodes" => out.nnodes = num(),
            "node_rank" => out.node_rank = num(),
            "base_gpu_id" => out.base_gpu_id = num(),
            "gpu_id_step" => out.gpu_id_step = num(),
            "host" => out.host = text.map(str::to_string),
            // Port 0 is "any free port" to bind: no address to poll.
            "port" => out.port = raw.parse().ok().filter(|&p: &u16| p > 0),
            "ssl_certfile" => out.tls = Some(raw != "None"),
            "enable_dp_attention" => out.enable_dp_attention = Some(raw == "True"),
            "speculative_algorithm" => {
                out.speculative_algorithm = text
                    .or(Some(raw).filter(|r| *r == "None"))
                    .map(str::to_string)
            }
            _ => {}
        }
    }
    out.model_name = served.or(model_path);
    // v0.5.22+ log DP attention as `attn_dp_size=N` with `dp_size=1` (the flags rewritten at
    // start-up): N is the DP width the ranks show.
    if let Some(n) = attn_dp.filter(|&n| n > 1) {
        out.dp_size = Some(out.dp_size.map_or(n, |d| d.max(n)));
        out.enable_dp_attention = Some(true);
    }
    out
}

/// The text of a Python string literal as `repr` prints it (`'a'`, `"it's"`, with `\\`, `\'`,
/// `\n`, `\xNN`, `\uNNNN` escapes); `None` for anything else (a number, `None`, a list).
fn py_str(raw: &str) -> Option<String> {
    let q = raw.chars().next().filter(|&c| c == '\'' || c == '"')?;
    let body = raw.strip_prefix(q)?.strip_suffix(q)?;
    if !body.contains('\\') {
        return Some(body.to_string());
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let hex = |chars: &mut std::str::Chars<'_>, n: usize| {
            let h: String = chars.take(n).collect();
            u32::from_str_radix(&h, 16).ok().and_then(char::from_u32)
        };
        let e = match chars.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'x' => hex(&mut chars, 2)?,
            'u' => hex(&mut chars, 4)?,
            'U' => hex(&mut chars, 8)?,
            other => other,
        };
        out.push(e);
    }
    Some(out)
}

/// The key at `i` and where its value starts: `key=` (the dataclass repr) or `'key': ` /
/// `"key": ` (the dict repr). `None` when `i` starts neither.
fn read_key(s: &str, i: usize) -> Option<(&str, usize)> {
    let b = s.as_bytes();
    let word_end = |from: usize| {
        let mut j = from;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
            j += 1;
        }
        j
    };
    match b.get(i)? {
        q @ (b'\'' | b'"') => {
            let e = word_end(i + 1);
            if e == i + 1 || b.get(e) != Some(q) || b.get(e + 1) != Some(&b':') {
                return None;
            }
            let mut v = e + 2;
            while b.get(v) == Some(&b' ') {
                v += 1;
            }
            Some((&s[i + 1..e], v))
        }
        _ => {
            let e = word_end(i);
            (e > i && b.get(e) == Some(&b'=')).then(|| (&s[i..e], e + 1))
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The same server printed by v0.5.18 (dataclass repr) and by v0.5.19+ (dict repr) reads
    /// the same; nested values and look-alike keys inside them are skipped.
    #[test]
    fn both_reprs() {
        let dataclass = "model_path='/models/DeepSeek-V3.2', tokenizer_path='/models/x', \
            tp_size=8, dp_size=8, pp_size=1, nnodes=2, node_rank=1, base_gpu_id=4, gpu_id_step=1, \
            json_model_override_args='{\"tp_size\": 99}', served_model_name='deepseek-v3.2', \
            enable_dp_attention=True, speculative_algorithm='EAGLE', disaggregation_mode='decode', \
            host='0.0.0.0', port=30001, api_key='sk-secret', bootstrap_port=8998)";
        let dict = "'model_path': '/models/DeepSeek-V3.2', 'tokenizer_path': '/models/x', \
            'tp_size': 8, 'dp_size': 8, 'pp_size': 1, 'nnodes': 2, 'node_rank': 1, \
            'base_gpu_id': 4, 'gpu_id_step': 1, 'model_loader_extra_config': {'tp_size': 99, \
            'nnodes': [1, 2]}, 'lora_paths': ['a', 'b'], 'served_model_name': 'deepseek-v3.2', \
            'enable_dp_attention': True, 'speculative_algorithm': 'EAGLE', 'disaggregation_mode': 'decode', \
            'host': '0.0.0.0', 'port': 30001, 'api_key': 'sk-secret', 'bootstrap_port': 8998}";
        let want = ServerArgs {
            model_name: Some("deepseek-v3.2".into()),
            disaggregation_mode: Some("decode".into()),
            tp_size: Some(8),
            dp_size: Some(8),
            pp_size: Some(1),
            nnodes: Some(2),
            node_rank: Some(1),
            base_gpu_id: Some(4),
            gpu_id_step: Some(1),
            enable_dp_attention: Some(true),
            speculative_algorithm: Some("EAGLE".into()),
            host: Some("0.0.0.0".into()),
            port: Some(30001),
            tls: None,
        };
        assert_eq!(parse_server_args(dataclass), want);
        assert_eq!(parse_server_args(dict), want);
    }

    /// The last field of each repr (before `)` or `}`), `None` values and a model path alone.
    #[test]
    fn last_field_and_none() {
        let a = parse_server_args("'model_path': 'm/x', 'served_model_name': None, 'tp_size': 2}");
        assert_eq!(a.model_name.as_deref(), Some("m/x"));
        assert_eq!(a.tp_size, Some(2));
        let b = parse_server_args("model_path='m/y', disaggregation_mode='null')");
        assert_eq!(b.model_name.as_deref(), Some("m/y"));
        assert_eq!(b.disaggregation_mode.as_deref(), Some("null"));
        // A quoted word that is a value, not a key, reads as nothing.
        let c = parse_server_args("'x', 'tp_size': 4}");
        assert_eq!(c.tp_size, Some(4));
        // Speculative decoding off is known (`None`), not unknown.
        let d = parse_server_args("'speculative_algorithm': None, 'tp_size': 1}");
        assert!(d.without_draft());
        assert!(!parse_server_args("tp_size=1)").without_draft());
        assert!(!parse_server_args("speculative_algorithm='NEXTN')").without_draft());
        // v0.5.22+: DP attention as `attn_dp_size` beside `dp_size: 1`.
        let e = parse_server_args(
            "'tp_size': 8, 'dp_size': 1, 'attn_dp_size': 8, 'enable_dp_attention': True}",
        );
        assert_eq!((e.dp_size, e.enable_dp_attention), (Some(8), Some(true)));
        let f = parse_server_args("'tp_size': 8, 'dp_size': 1, 'attn_dp_size': 1}");
        assert_eq!(f.dp_size, Some(1));
        // Python's escapes in a repr'd string are decoded.
        let g = parse_server_args(r#"'served_model_name': 'a\'b"c\\d\xe9', 'tp_size': 1}"#);
        assert_eq!(g.model_name.as_deref(), Some("a'b\"c\\d\u{e9}"));
        let h = parse_server_args(r#"served_model_name="it's", tp_size=1)"#);
        assert_eq!(h.model_name.as_deref(), Some("it's"));
        // A port that is no TCP port reads as none; IPv6 hosts as printed.
        let i = parse_server_args("host='::', port=70000)");
        assert_eq!((i.host.as_deref(), i.port), (Some("::"), None));
    }
}
