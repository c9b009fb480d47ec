//! Retries settlements that failed after serving until they commit (src/metering/unsettled.rs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// How often a waiting settlement is tried again: often enough that a ledger back from an
/// outage has every charge written within a second.
const RETRY_EVERY: Duration = Duration::from_millis(250);

/// Retries every waiting settlement each [`RETRY_EVERY`]. At shutdown it goes on until the
/// queue is empty or the grace period is nearly over, then logs what it could not write, with
/// the amounts.
pub struct UnsettledService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for UnsettledService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let shared = &self.0;
        let Some(ledger) = super::ledger_when_connected(shared, &mut shutdown).await else {
            return;
        };
        let pass = || async {
            if shared.unsettled.is_empty() {
                return;
            }
            if let Err(e) = shared.unsettled.retry(&ledger, &shared.metrics).await {
                tracing::warn!(
                    waiting = shared.unsettled.len(),
                    "queued settlements still cannot be written: {e}"
                );
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(RETRY_EVERY) => {}
            }
            // A pass waits for the store up to its acquire timeout; shutdown does not wait for it
            // (a pass cut short loses nothing: see `Unsettled::retry`), or the grace period could
            // end before the unwritten amounts below are logged.
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = pass() => {}
            }
        }
        // Requests still in flight may settle (and fail) during the grace period: keep going
        // until shortly before the runtime is stopped.
        let grace = Duration::from_secs(shared.runtime.load().config.server.graceful_shutdown_secs);
        let until = Instant::now() + grace.saturating_sub(Duration::from_millis(400));
        // Each pass is cut short at the deadline: a store that does not answer must not keep
        // the log line below from being written before the runtime stops.
        while Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(left, pass()).await;
            let left = until.saturating_duration_since(Instant::now());
            tokio::time::sleep(RETRY_EVERY.min(left)).await;
        }
        if !shared.unsettled.is_empty() {
            shared.unsettled.log_unwritten();
            // The log writer thread flushes every 10 ms; the process may exit as soon as this
            // service returns, and these lines are the only record of the money.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
