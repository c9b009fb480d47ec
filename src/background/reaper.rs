//! The reaper: expired credit holds refunded, expired dashboard sessions deleted, stored
//! responses past their retention emptied, request-log payloads and records past theirs
//! nulled and deleted.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// Refunds credit holds past their expiry (left by an instance that stopped mid-request) and
/// deletes expired dashboard sessions, on an interval, once the ledger is connected.
pub struct ReaperService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for ReaperService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(ledger) = super::ledger_when_connected(&self.0, &mut shutdown).await else {
            return;
        };
        let every = self.0.storage.hold_reap_interval;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(every) => {}
            }
            match ledger.release_expired_holds(crate::clock::now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    released = n,
                    "refunded expired credit holds (an instance stopped mid-request)"
                ),
                Err(e) => tracing::error!("could not release expired holds: {e}"),
            }
            if let Err(e) = ledger.delete_expired_sessions(crate::clock::now_ms()).await {
                tracing::error!("could not delete expired sessions: {e}");
            }
            // A stored response past its retention is emptied, its row kept as long again so
            // a chain that needs it is told it expired (400), not that it never was (404).
            let retention = self.0.runtime.load().config.responses.retention_secs;
            let now = crate::clock::now_secs();
            if let Err(e) = ledger.expire_responses(now, retention).await {
                tracing::error!("could not expire stored responses: {e}");
            }
            let log = self.0.runtime.load().config.telemetry.request_log.clone();
            crate::request_log::writer::expire(&ledger, &log, crate::clock::now_ms()).await;
        }
    }
}
