//! The routes, served with axum: the live page, its JSON, the health probes and the exposition.

use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::cache::Exposition;
use super::worker::Worker;
use crate::export::format::{self, Negotiated};
use crate::export::live::{Live, PAGE};
use crate::export::metrics::TEXT_CONTENT_TYPE;
use std::time::Instant;

/// Paths answered without credentials even when `--web.config.file` sets basic auth, as
/// Prometheus answers them: probes carry none.
pub const UNAUTHENTICATED: [&str; 2] = ["/-/healthy", "/-/ready"];

/// Marks a request to an [`UNAUTHENTICATED`] path that came without valid credentials while
/// basic auth is configured: its answer names nothing of the inputs (paths, units and server
/// names, which everything else keeps behind the 401).
#[derive(Debug, Clone, Copy)]
pub struct Anonymous;

/// Paths of our own endpoints, which `--web.telemetry-path` cannot take.
pub const RESERVED: [&str; 3] = ["/api/v1/status", "/-/healthy", "/-/ready"];

/// Checks a `--web.telemetry-path`: it starts with `/`, is none of [`RESERVED`], and holds only
/// letters, digits and `/-._~` (the router reads `{…}`, `:` and `*` as patterns).
///
/// # Errors
/// A message naming the problem.
pub fn check_telemetry_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') {
        return Err("--web.telemetry-path must start with /".into());
    }
    if RESERVED.contains(&p) {
        return Err(format!(
            "--web.telemetry-path {p} is one of the exporter's own endpoints"
        ));
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "/-._~".contains(c);
    if !p.chars().all(plain) {
        return Err(format!(
            "--web.telemetry-path {p:?} may hold only letters, digits and /-._~"
        ));
    }
    Ok(())
}

/// The routes: `/` (the live page), `/api/v1/status` (its JSON, see [`crate::export::live::Status`]),
/// `/-/healthy` (200 while serving), `/-/ready` (200 once every source caught up at start, else
/// 503 naming those still reading, or only "Not ready." to an [`Anonymous`] request) and `telemetry_path` (the exposition, gzip-compressed when
/// the scraper accepts it, as Prometheus does; at `/` it replaces the page). `telemetry_path`
/// has passed [`check_telemetry_path`].
pub fn router(
    telemetry_path: &str,
    exposition: Arc<Exposition>,
    live: Arc<Live>,
    encoder: Arc<Worker>,
    status_worker: Arc<Worker>,
) -> Router {
    let status = live.clone();
    // One encoding at a time: scrapes wait for their turn without a thread, and those that
    // waited take the encoding done meanwhile. The live page's status has a gate and a thread
    // of its own, so its clients never queue ahead of a scrape.
    let gate = Arc::new(tokio::sync::Semaphore::new(1));
    let status_gate = Arc::new(tokio::sync::Semaphore::new(1));
    let mut r = Router::new();
    if telemetry_path != "/" {
        r = r.route("/", get(|| async { Html(PAGE) }));
    }
    r = r
        .route(
            "/api/v1/status",
            get(move || {
                let live = status.clone();
                let gate = status_gate.clone();
                let worker = status_worker.clone();
                async move {
                    let json =
                        |b| ([(header::CONTENT_TYPE, "application/json")], b).into_response();
                    // One status answers every request within its minimum age; the families of a
                    // big state take a while: off the async workers, one at a time.
                    let asked = Instant::now();
                    if let Some(b) = live.status_at_hand(asked) {
                        return json(b);
                    }
                    let Ok(_turn) = gate.acquire_owned().await else {
                        return StatusCode::SERVICE_UNAVAILABLE.into_response();
                    };
                    match worker.run(move || live.status_json(asked)).await {
                        Some(b) => json(b),
                        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                    }
                }
            }),
        )
        .route("/-/healthy", get(|| async { "Healthy.\n" }))
        .route(
            "/-/ready",
            get(move |req: axum::extract::Request| {
                let why = live.readiness().why_not();
                let anonymous = req.extensions().get::<Anonymous>().is_some();
                async move {
                    match why {
                        None => (StatusCode::OK, "Ready.\n".to_string()),
                        Some(_) if anonymous => {
                            (StatusCode::SERVICE_UNAVAILABLE, "Not ready.\n".to_string())
                        }
                        Some(why) => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            format!("Not ready: {why}.\n"),
                        ),
                    }
                }
            }),
        );
    r = r.route(
        telemetry_path,
        get(move |headers: HeaderMap| {
            let x = exposition.clone();
            let gate = gate.clone();
            let worker = encoder.clone();
            async move {
                // An encoding at hand is answered at once; encoding (which may take a while
                // for a big state) goes off the async workers, one at a time.
                let asked = Instant::now();
                if let Some(r) = cached_response(&x, &headers, asked) {
                    return r;
                }
                let Ok(_turn) = gate.acquire_owned().await else {
                    return StatusCode::SERVICE_UNAVAILABLE.into_response();
                };
                if let Some(r) = cached_response(&x, &headers, asked) {
                    return r;
                }
                worker
                    .run(move || metrics_response(&x, &headers, asked))
                    .await
                    .unwrap_or_else(|| StatusCode::INTERNAL_SERVER_ERROR.into_response())
            }
        }),
    );
    r.fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .layer(axum::middleware::from_fn(hardening))
}

/// The live page's Content-Security-Policy: nothing but its own inline script (by its
/// SHA-256), inline styles, its JSON from the same origin; never framed.
fn csp() -> &'static header::HeaderValue {
    static CSP: std::sync::OnceLock<header::HeaderValue> = std::sync::OnceLock::new();
    CSP.get_or_init(|| {
        use base64::Engine as _;
        let script = PAGE
            .split_once("<script>")
            .and_then(|(_, rest)| rest.split_once("</script>"))
            .map_or("", |(s, _)| s);
        let digest = ring::digest::digest(&ring::digest::SHA256, script.as_bytes());
        let hash = base64::engine::general_purpose::STANDARD.encode(digest.as_ref());
        header::HeaderValue::from_str(&format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self'; frame-ancestors 'none'"
        ))
        .expect("a header value")
    })
}

/// Headers on every response (repro 33): the CSP above, `X-Content-Type-Options: nosniff`,
/// `X-Frame-Options: DENY`, and `Cache-Control: no-store` on the status JSON (behind basic
/// auth it must not be kept by browsers and proxies).
async fn hardening(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let status = req.uri().path() == "/api/v1/status";
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, csp().clone());
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    if status {
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
    }
    r
}

/// The `Content-Encoding` the scraper's `Accept-Encoding` allows for gzip, if any.
fn wants_gzip(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok());
    gzip_label(accept)
}

/// The format and names the scraper's `Accept` header gets ([`format::negotiate`]: as
/// SGLang's own `/metrics` answers it, unless `--web.names` fixes a style).
fn negotiated(x: &Exposition, headers: &HeaderMap) -> Negotiated {
    // Bytes past ASCII (prometheus_client reads the header as Latin-1) never name a format:
    // read around them, not the header dropped.
    let accept: Vec<std::borrow::Cow<'_, str>> = headers
        .get_all(header::ACCEPT)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()))
        .collect();
    format::negotiate(&accept.join(","), x.names())
}

/// The response for an encoding of `body` (gzip under `label`, else plain), after the
/// process families read now ([`super::process`]), in the negotiated format `n`. Either way it
/// says it varies with `Accept-Encoding` and `Accept`, so no cache between scraper and
/// exporter hands one client the other's encoding or format.
fn respond(body: bytes::Bytes, label: Option<&'static str>, n: Negotiated) -> Response {
    // The process families are read at each scrape, ahead of the cached state's.
    let body = axum::body::Body::new(crate::export::process::body(
        body,
        label.is_some(),
        n.variant,
    ));
    let ct = match n.content_type {
        std::borrow::Cow::Borrowed(s) => header::HeaderValue::from_static(s),
        std::borrow::Cow::Owned(s) => header::HeaderValue::from_str(&s)
            .unwrap_or(header::HeaderValue::from_static(TEXT_CONTENT_TYPE)),
    };
    let vary = header::HeaderValue::from_static("Accept-Encoding, Accept");
    let mut r = ([(header::CONTENT_TYPE, ct), (header::VARY, vary)], body).into_response();
    if let Some(label) = label {
        let encoding = header::HeaderValue::from_static(label);
        r.headers_mut().insert(header::CONTENT_ENCODING, encoding);
    }
    r
}

/// The response from an encoding at hand for a scrape asked at `asked`
/// ([`Exposition::fresh`]), if there is one.
fn cached_response(x: &Exposition, headers: &HeaderMap, asked: Instant) -> Option<Response> {
    let label = wants_gzip(headers);
    let n = negotiated(x, headers);
    Some(respond(
        x.fresh(n.variant, label.is_some(), asked)?,
        label,
        n,
    ))
}

/// The response for a scrape asked at `asked`, encoding the state when due.
fn metrics_response(x: &Exposition, headers: &HeaderMap, asked: Instant) -> Response {
    let label = wants_gzip(headers);
    let n = negotiated(x, headers);
    let body = if label.is_some() {
        x.gzip_for(n.variant, asked)
    } else {
        x.text_for(n.variant, asked)
    };
    respond(body, label, n)
}

/// The `Content-Encoding` to answer with gzip, when the `Accept-Encoding` values allow it
/// (RFC 9110 §12.5.3): `gzip` or `x-gzip` (answered under the name asked for) with a q-value
/// above 0, else `*` above 0 where gzip is not refused by name. A q-value is a number from 0 to
/// 1 (`q=0.000` is 0); an entry whose q-value is no such number is ignored.
fn gzip_label<'a>(values: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let (mut named, mut star) = (None::<(f64, &'static str)>, None::<f64>);
    for entry in values.flat_map(|v| v.split(',')) {
        let mut parts = entry.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let mut q = Some(1.0);
        for p in parts {
            if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                q = qvalue(v.trim());
            }
        }
        let Some(q) = q else { continue };
        if name.eq_ignore_ascii_case("gzip") {
            named = Some((q, "gzip"));
        } else if name.eq_ignore_ascii_case("x-gzip") {
            named = Some((q, "x-gzip"));
        } else if name == "*" {
            star = Some(q);
        }
    }
    match (named, star) {
        (Some((q, label)), _) => (q > 0.0).then_some(label),
        (None, Some(q)) => (q > 0.0).then_some("gzip"),
        (None, None) => None,
    }
}

/// An RFC 9110 qvalue: `0`, `1`, or up to three decimals (`0.5`, `1.000`); `None` otherwise.
fn qvalue(v: &str) -> Option<f64> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let ok = matches!(int, "0" | "1")
        && frac.len() <= 3
        && frac.bytes().all(|c| c.is_ascii_digit())
        && (int == "0" || frac.bytes().all(|c| c == b'0'));
    ok.then(|| v.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telemetry_paths_that_the_router_could_misread_are_refused() {
        for ok in ["/metrics", "/", "/sglang/metrics", "/a.b-c_d~e"] {
            assert_eq!(check_telemetry_path(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_telemetry_path("/-/ready"),
            Err("--web.telemetry-path /-/ready is one of the exporter's own endpoints".into())
        );
        assert_eq!(
            check_telemetry_path("metrics"),
            Err("--web.telemetry-path must start with /".into())
        );
        for bad in ["/{x}", "/m/:id", "/*all", "/a b", "/m?x"] {
            assert!(check_telemetry_path(bad).is_err(), "{bad}");
        }
    }

    /// Repro 21: `gzip;q=0.000` and `gzip;q=0, *` are refusals, `x-gzip` is gzip.
    #[test]
    fn accept_encoding_q_values_are_numbers() {
        let label = |v: &str| gzip_label(std::iter::once(v));
        assert_eq!(label("gzip"), Some("gzip"));
        assert_eq!(label("gzip, deflate"), Some("gzip"));
        assert_eq!(label("x-gzip"), Some("x-gzip"));
        assert_eq!(label("GZIP;q=0.5"), Some("gzip"));
        assert_eq!(label("*"), Some("gzip"));
        // Refused, however written; a refusal by name beats `*`.
        for no in [
            "gzip;q=0",
            "gzip;q=0.000",
            "gzip; q=0",
            "gzip;q=0, *",
            "*;q=0",
            "identity",
            "",
        ] {
            assert_eq!(label(no), None, "{no:?}");
        }
        // A q-value that is no number: the entry is ignored.
        assert_eq!(label("gzip;q=abc"), None);
        assert_eq!(label("gzip;q=1.5"), None);
        assert_eq!(label("gzip;q=abc, *"), Some("gzip"));
        // Several header values.
        assert_eq!(
            gzip_label(["deflate", "gzip;q=0.1"].into_iter()),
            Some("gzip")
        );
    }
}
