//! The credit-lease rounds.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// Runs the credit-lease rounds (src/metering/leases.rs) every `lease_sync_ms`, or sooner when a large
/// batch waits, and returns every lease at shutdown.
pub struct LeaseService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for LeaseService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let leases = &self.0.leases;
        if !leases.enabled() {
            return;
        }
        let Some(ledger) = super::ledger_when_connected(&self.0, &mut shutdown).await else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(leases.sync_every) => {}
                _ = leases.wake.notified() => {}
            }
            leases.tick(&ledger).await;
        }
        leases.release_all(&ledger).await;
        tracing::info!("credit leases returned");
    }
}
