//! The `/metrics` endpoint and a small landing page, served with axum.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::metrics::TEXT_CONTENT_TYPE;

/// Produces the exposition text on each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The routes: `/` (landing page) and `telemetry_path` (the exposition).
pub fn router(telemetry_path: &str, render: Render) -> Router {
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
            get(move || {
                let render = render.clone();
                async move { metrics_response(&render) }
            }),
        );
    }
    r.fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
}

fn metrics_response(render: &Render) -> Response {
    let body = render();
    ([(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)], body).into_response()
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
