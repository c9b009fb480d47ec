//! The credit-lease rounds.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// Runs the credit-lease rounds (src/metering/leases.rs) every `lease_sync_ms`, or sooner when
/// a large batch waits. At shutdown the requests still in flight keep settling against their
/// leases: no new lease is taken, rounds go on writing usage rows, and each lease is returned
/// once its holds have settled.
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
            self.0
                .metrics
                .ledger_queued
                .with_label_values(&["lease_rows"])
                .set(leases.pending_rows() as i64);
        }
        // Until the process ends (Pingora stops this runtime after the grace period): a lease
        // still serving a request then expires and the reaper refunds it, having lost at most
        // one round's rows.
        leases.close_all();
        while !leases.is_empty() {
            tokio::time::sleep(leases.sync_every).await;
            leases.tick(&ledger).await;
        }
        tracing::info!("credit leases returned");
    }
}
