//! The SIGHUP reload of the config file.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::{Runtime, Shared};

/// Reloads the config file on SIGHUP: providers, models, aliases and timeouts. A file that
/// does not validate is refused and the running config stays. Requests in flight keep the
/// snapshot they started with.
pub struct ReloadService(pub Arc<Shared>);

impl ReloadService {
    pub async fn reload(&self) -> Result<(), String> {
        let cfg = crate::config::load_file(&self.0.config_path).map_err(|errs| {
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let rt = Runtime::build(cfg).await?;
        self.0.runtime.store(Arc::new(rt));
        Ok(())
    }
}

#[async_trait]
impl BackgroundService for ReloadService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("cannot listen for SIGHUP, reload disabled: {e}");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                got = hup.recv() => {
                    if got.is_none() { return; }
                    match self.reload().await {
                        Ok(()) => {
                            self.0.metrics.reloads.with_label_values(&["ok"]).inc();
                            tracing::info!(path = %self.0.config_path.display(), "config reloaded");
                        }
                        Err(e) => {
                            self.0.metrics.reloads.with_label_values(&["refused"]).inc();
                            tracing::error!(path = %self.0.config_path.display(), "config reload refused, keeping the running config: {e}");
                        }
                    }
                }
            }
        }
    }
}
