//! Bounding HTTP access-line labels: only SGLang's own endpoints and the standard methods are
//! kept as label values, so scanners and typos cannot grow the series count.

/// HTTP methods kept as label values, then `OTHER` for the rest. In byte order, so that keys
/// ordered by index list as their label values would.
const METHODS: [&str; 8] = [
    "DELETE", "GET", "HEAD", "OPTIONS", "OTHER", "PATCH", "POST", "PUT",
];
const OTHER_METHOD: u8 = 4;

/// SGLang's HTTP endpoints kept as label values, then `other` for any other path. In byte order
/// (`other` sorts after every `/…`), as [`METHODS`].
const PATHS: [&str; 29] = [
    "/",
    "/abort_request",
    "/classify",
    "/continue_generation",
    "/encode",
    "/flush_cache",
    "/generate",
    "/get_load",
    "/get_model_info",
    "/get_server_info",
    "/health",
    "/health_generate",
    "/metrics",
    "/model_info",
    "/pause_generation",
    "/server_info",
    "/set_internal_state",
    "/start_profile",
    "/stop_profile",
    "/update_weights_from_disk",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/loads",
    "/v1/models",
    "/v1/rerank",
    "/v1/responses",
    "/v1/score",
    "other",
];
const OTHER_PATH: u8 = 28;

/// One access-line series of a server: method, path and status, the first two as indices into
/// the kept label values. Ordered as the label values `(method, path, status)` are; comparing
/// two keys compares three integers (an access-line series is looked up on every access line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HttpKey {
    method: u8,
    path: u8,
    /// The HTTP status code as printed (0 when unreadable).
    pub status: u16,
}

impl HttpKey {
    /// The key of a request line's method, path and status; unknown methods read `OTHER`,
    /// unknown paths `other`, a path's trailing `/` is ignored.
    pub fn of(method: &str, path: &str, status: u16) -> HttpKey {
        HttpKey {
            method: method_index(method),
            path: path_index(path),
            status,
        }
    }

    /// The `method` label value.
    pub fn method(&self) -> &'static str {
        METHODS[usize::from(self.method)]
    }

    /// The `path` label value.
    pub fn path(&self) -> &'static str {
        PATHS[usize::from(self.path)]
    }
}

// A `match` on string literals compares each arm's constant bytes inline, where a search of the
// tables would call `memcmp` once per candidate of the same length.
fn method_index(m: &str) -> u8 {
    match m {
        "DELETE" => 0,
        "GET" => 1,
        "HEAD" => 2,
        "OPTIONS" => 3,
        "PATCH" => 5,
        "POST" => 6,
        "PUT" => 7,
        _ => OTHER_METHOD,
    }
}

fn path_index(p: &str) -> u8 {
    let p = p.strip_suffix('/').filter(|s| !s.is_empty()).unwrap_or(p);
    match p {
        "/" => 0,
        "/abort_request" => 1,
        "/classify" => 2,
        "/continue_generation" => 3,
        "/encode" => 4,
        "/flush_cache" => 5,
        "/generate" => 6,
        "/get_load" => 7,
        "/get_model_info" => 8,
        "/get_server_info" => 9,
        "/health" => 10,
        "/health_generate" => 11,
        "/metrics" => 12,
        "/model_info" => 13,
        "/pause_generation" => 14,
        "/server_info" => 15,
        "/set_internal_state" => 16,
        "/start_profile" => 17,
        "/stop_profile" => 18,
        "/update_weights_from_disk" => 19,
        "/v1/chat/completions" => 20,
        "/v1/completions" => 21,
        "/v1/embeddings" => 22,
        "/v1/loads" => 23,
        "/v1/models" => 24,
        "/v1/rerank" => 25,
        "/v1/responses" => 26,
        "/v1/score" => 27,
        _ => OTHER_PATH,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kept_value_reads_as_itself_and_the_tables_are_in_byte_order() {
        for (i, m) in METHODS.iter().enumerate() {
            assert_eq!(HttpKey::of(m, "/", 200).method(), *m);
            assert_eq!(usize::from(method_index(m)), i);
        }
        for (i, p) in PATHS.iter().enumerate().filter(|(_, p)| **p != "other") {
            assert_eq!(HttpKey::of("GET", p, 200).path(), *p);
            assert_eq!(usize::from(path_index(p)), i);
        }
        assert!(METHODS.windows(2).all(|w| w[0] < w[1]));
        assert!(PATHS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn unknown_values_are_bounded_and_a_trailing_slash_is_ignored() {
        let k = HttpKey::of("BREW", "/wp-admin", 404);
        assert_eq!((k.method(), k.path(), k.status), ("OTHER", "other", 404));
        assert_eq!(HttpKey::of("get", "/generate/", 200).method(), "OTHER");
        assert_eq!(HttpKey::of("GET", "/generate/", 200).path(), "/generate");
        assert_eq!(HttpKey::of("GET", "/", 200).path(), "/");
        assert_eq!(HttpKey::of("GET", "//", 200).path(), "/");
        assert_eq!(HttpKey::of("GET", "", 200).path(), "other");
        // Ordered as the label values.
        assert!(HttpKey::of("GET", "/v1/score", 500) < HttpKey::of("POST", "/", 200));
        assert!(HttpKey::of("POST", "/generate", 200) < HttpKey::of("POST", "/x", 200));
    }
}
