//! Signals of the main mode: SIGTERM and SIGINT end it (the Pushgateway group is deleted on the
//! way out); SIGHUP does not. Log rotation scripts send SIGHUP to daemons to make them reopen
//! their logs; this exporter follows rotation by itself, so SIGHUP only re-reads the web
//! config (`--web.config.file`, which is also re-read whenever it changes) and is logged.

use super::webconfig::Reloader;

/// Completes on SIGTERM or SIGINT; handles SIGHUP meanwhile. The handlers are installed when
/// this is called (inside the runtime), not when the future is first polled: a SIGTERM that
/// comes while the listeners are being bound is not the default action (death).
pub fn shutdown(web: Option<Reloader>) -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let (Ok(mut term), Ok(mut int), Ok(mut hup)) = signals else {
                let _ = tokio::signal::ctrl_c().await;
                tracing::info!("shutting down");
                return;
            };
            loop {
                tokio::select! {
                    _ = int.recv() => break,
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
}
