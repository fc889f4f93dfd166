//! Bounding HTTP access-line labels: only SGLang's own endpoints and the standard methods are
//! kept as label values, so scanners and typos cannot grow the series count.

/// HTTP methods kept as label values; others read `OTHER`.
pub fn normalise_method(m: &str) -> &'static str {
    const KNOWN: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"];
    KNOWN.iter().find(|k| **k == m).copied().unwrap_or("OTHER")
}

/// SGLang's HTTP endpoints kept as label values; any other path reads `other`, so scanners and
/// typos cannot grow the series count.
pub fn normalise_path(p: &str) -> &'static str {
    const KNOWN: [&str; 28] = [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/models",
        "/v1/rerank",
        "/v1/score",
        "/v1/responses",
        "/v1/loads",
        "/generate",
        "/encode",
        "/classify",
        "/health",
        "/health_generate",
        "/get_model_info",
        "/get_server_info",
        "/server_info",
        "/model_info",
        "/get_load",
        "/flush_cache",
        "/metrics",
        "/abort_request",
        "/start_profile",
        "/stop_profile",
        "/update_weights_from_disk",
        "/pause_generation",
        "/continue_generation",
        "/set_internal_state",
        "/",
    ];
    let p = p.strip_suffix('/').filter(|s| !s.is_empty()).unwrap_or(p);
    KNOWN.iter().find(|k| **k == p).copied().unwrap_or("other")
}
