//! Signals of the main mode: SIGTERM and SIGINT end it (the Pushgateway group is deleted on the
//! way out); SIGHUP does not. Log rotation scripts send SIGHUP to daemons to make them reopen
//! their logs; this exporter follows rotation by itself, so SIGHUP only re-reads the web
//! config (`--web.config.file`, which is also re-read whenever it changes) and is logged.

use super::webconfig::Reloader;

/// Completes on SIGTERM or SIGINT; handles SIGHUP meanwhile.
pub async fn shutdown(web: Option<Reloader>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = hup.recv() => {
                    if let Some(w) = &web {
                        let _ = w.current();
                    }
                    tracing::info!("SIGHUP: web config checked for changes; followed files need no reopening (rotation is detected)");
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (tokio::signal::ctrl_c().await, web);
    }
    tracing::info!("shutting down");
}
