//! The `/metrics` endpoint and a small landing page, served with axum.

use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::cache::Exposition;
use super::metrics::TEXT_CONTENT_TYPE;

/// The routes: `/` (landing page) and `telemetry_path` (the exposition, gzip-compressed when the
/// scraper accepts it, as Prometheus does).
pub fn router(telemetry_path: &str, exposition: Arc<Exposition>) -> Router {
    let landing = format!(
        "<!doctype html><html><head><title>SGLang log exporter</title></head><body>\
         <h1>SGLang log exporter</h1><p>Version {}.</p>\
         <p><a href=\"{path}\">Metrics</a></p></body></html>",
        env!("CARGO_PKG_VERSION"),
        path = html_escape(telemetry_path),
    );
    let mut r = Router::new().route("/", get(move || async move { Html(landing) }));
    if telemetry_path != "/" {
        r = r.route(
            telemetry_path,
            get(move |headers: HeaderMap| {
                let x = exposition.clone();
                // Encoding may take a while for a big state: off the async workers.
                async move {
                    tokio::task::spawn_blocking(move || metrics_response(&x, &headers))
                        .await
                        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
                }
            }),
        );
    }
    r.fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
}

fn metrics_response(x: &Exposition, headers: &HeaderMap) -> Response {
    if accepts_gzip(headers) {
        let body = x.gzip();
        return (
            [
                (header::CONTENT_TYPE, TEXT_CONTENT_TYPE),
                (header::CONTENT_ENCODING, "gzip"),
            ],
            body,
        )
            .into_response();
    }
    ([(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)], x.text()).into_response()
}

/// Whether `Accept-Encoding` lists gzip (without `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|enc| {
            let mut parts = enc.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let zero = parts.any(|p| p.replace(' ', "") == "q=0");
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !zero
        })
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Parses a listen address in the exporter convention: `:8771` means every interface,
/// `127.0.0.1:8771` one address, `[::1]:8771` IPv6.
///
/// # Errors
/// A message naming the bad address.
pub fn parse_listen(addr: &str) -> Result<String, String> {
    let full = if let Some(port) = addr.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        addr.to_string()
    };
    use std::net::ToSocketAddrs;
    match full.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => Ok(a.to_string()),
        _ => Err(format!(
            "--web.listen-address {addr:?} is not HOST:PORT or :PORT (HOST an address or a name that resolves)"
        )),
    }
}
