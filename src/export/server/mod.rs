//! The HTTP server: listen addresses ([`listen`]), the accept loop and each connection's TLS
//! handshake and deadlines (here), admission when full ([`conns`]), TLS settings and basic auth
//! from `--web.config.file` ([`webconfig`]), the routes ([`routes`]), the encoded exposition
//! they serve ([`cache`]) and the server's own threads for blocking work ([`worker`]). What the
//! routes show is built outside: [`crate::export::metrics`], [`crate::export::live`].

pub mod cache;
pub mod conns;
pub mod listen;
pub mod routes;
pub mod webconfig;
pub mod worker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use webconfig::Reloader;

/// Time a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (a larger one is answered 431) and what a connection's read buffer may
/// grow to (one read past it at most), so many clients sending big unfinished heads hold little
/// memory (hyper's default is about 400 KiB a connection); a scraper's head is well under 1 KiB,
/// a browser's a few KiB.
const MAX_HEAD_BYTES: usize = 32 * 1024;
/// Serves `app` on `listener`, with the web configuration when there is one: TLS when configured
/// (settings taken per connection, so rotated certificates apply to new connections) and basic
/// auth on every route but the probes ([`routes::UNAUTHENTICATED`]). Without one, plain
/// HTTP. Every connection has a deadline for its request head and for each write of its
/// response, and admission closes an idle or still connection when full (see
/// [`conns`]), so idle, slow or stuck clients cannot pile up.
/// Stops accepting when `shutdown` completes.
///
/// # Errors
/// An I/O error of the listener.
pub async fn serve(
    listeners: Vec<TcpListener>,
    app: Router,
    web: Option<Reloader>,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Credentials are checked before any routing: the inner router (routes, method routing
    // and its `Allow` headers, the 404) runs only for an authorised request, so every
    // unauthorised one gets the same 401 whatever its path and method.
    let app = match &web {
        Some(w) => Router::new()
            .fallback_service(app)
            .layer(axum::middleware::from_fn_with_state(
                w.clone(),
                webconfig::basic_auth,
            )),
        None => app,
    };
    // At most this many connections at once over every listener (see `conns`).
    let conns = conns::Conns::new(max_connections);
    // Each listener accepts on its own task; one queue of accepted connections, so admission
    // sees them all.
    let (tx, mut accepted) = tokio::sync::mpsc::channel(16);
    let acceptors: Vec<_> = listeners
        .into_iter()
        .map(|l| tokio::spawn(accept_loop(l, tx.clone())))
        .collect();
    drop(tx);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            a = accepted.recv() => match a {
                Some(a) => a,
                None => return Ok(()),
            },
            _ = &mut shutdown => {
                for a in &acceptors {
                    a.abort();
                }
                return Ok(());
            }
        };
        let tls = web.as_ref().and_then(|w| w.current().tls.clone());
        let app = app.clone();
        let conns = conns.clone();
        tokio::spawn(async move {
            // Full of connections being served: wait (briefly) for one to become evictable.
            let Ok(ticket) = conns.admit_waiting().await else {
                tracing::debug!(%peer, "too many connections (--web.max-connections), all being served; closed the newcomer");
                return;
            };
            // Every byte the connection moves is noted (it is evictable once idle or still),
            // and a response write that makes no progress ends it (see `conns`).
            let io = conns::ProgressIo::new(tcp, ticket.progress.clone());
            let service =
                conns::NoteDispatch::new(TowerToHyperService::new(app), ticket.progress.clone());
            let evicted = ticket.evict.clone();
            tokio::select! {
                _ = serve_one(io, peer, tls, service) => {}
                _ = evicted.notified() => {
                    tracing::debug!(%peer, "closed an idle or still connection, to make room");
                }
            }
            drop(ticket);
        });
    }
}

/// Accepts connections on `listener` into `tx` until the receiver is gone. Out of file
/// descriptors and the like: wait a little, keep accepting; one warning per episode.
async fn accept_loop(
    listener: TcpListener,
    tx: tokio::sync::mpsc::Sender<(tokio::net::TcpStream, std::net::SocketAddr)>,
) {
    let mut warned = false;
    loop {
        match listener.accept().await {
            Ok(a) => {
                warned = false;
                if tx.send(a).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(
                        "accept failed: {e}; retrying (logged once until an accept succeeds)"
                    );
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves one connection: the TLS handshake (bounded), then HTTP/1 with a deadline for each
/// request head, so a client that never finishes one does not hold the connection forever.
async fn serve_one<S>(
    tcp: conns::ProgressIo<tokio::net::TcpStream>,
    peer: std::net::SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    service: S,
) where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES);
    let res = match &tls {
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(tls));
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => http.serve_connection(TokioIo::new(stream), service).await,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            }
        }
        None => http.serve_connection(TokioIo::new(tcp), service).await,
    };
    if let Err(e) = res {
        tracing::debug!(%peer, "connection ended with an error: {e}");
    }
}
