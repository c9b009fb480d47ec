//! Connecting the ledger store, then checkpointing SQLite's write-ahead log and probing a store
//! that stopped answering.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::ledger::breaker;
use crate::runtime::Shared;

/// How often SQLite's write-ahead log is checkpointed into the database file, and an
/// unreachable store probed.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);
/// Past this many pages in the log (64 MiB at SQLite's 4 KiB pages; ~3 s of writes at the
/// gateway's full speed on the development machine) a checkpoint also starts it over.
const WAL_RESTART_PAGES: i64 = 16_384;

/// Connects the ledger store inside Pingora's long-lived runtime (retrying until it answers)
/// and publishes it to the request path.
pub struct LedgerService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for LedgerService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let url = self.0.storage.database_url.clone();
        let mut wait = Duration::from_millis(200);
        let ledger = loop {
            let storage = &self.0.storage;
            let pooled = storage.transaction_pooler;
            match crate::ledger::Ledger::connect_with(&url, storage.acquire_timeout, pooled).await {
                Ok(l) => break l,
                Err(e) => {
                    tracing::error!("ledger store unreachable, retrying in {wait:?}: {e}");
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        };
        tracing::info!(
            backend = ledger.backend(),
            "ledger store connected and migrated"
        );
        // A failed attempt before this one opened the circuit; connecting and migrating just
        // proved the store answers, so requests need not wait for the next probe.
        breaker::close();
        let _ = self.0.ledger.set(ledger.clone());
        // SQLite's checkpoints, off the commits (see `Ledger::connect`), and the probe that
        // closes the ledger's circuit once the store answers again (`ledger::breaker`).
        let acquire = self.0.storage.acquire_timeout;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(CHECKPOINT_EVERY) => {}
            }
            if breaker::is_open() {
                if matches!(tokio::time::timeout(acquire, ledger.ping()).await, Ok(true)) {
                    if let Some(ms) = breaker::close() {
                        tracing::info!(open_ms = ms, "ledger store answers again");
                    }
                }
                continue;
            }
            if let Err(e) = ledger.checkpoint(WAL_RESTART_PAGES).await {
                tracing::warn!("ledger checkpoint failed, will retry: {e}");
            }
        }
    }
}
