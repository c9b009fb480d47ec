//! Sweeping the in-process rate-limit counters: entries that left their windows are dropped
//! off the request path, so memory holds only what a window still counts; and sticky routing's
//! in-process affinities that expired (`crate::routing::store`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// How often the in-process counters are swept.
const EVERY: Duration = Duration::from_secs(10);

pub struct LimiterSweepService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for LimiterSweepService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(EVERY) => {}
            }
            let idents = self.0.limiter.sweep_local();
            tracing::debug!(idents, "in-process rate-limit counters swept");
            let affinities = self.0.sticky.sweep();
            tracing::debug!(affinities, "in-process sticky-routing affinities swept");
        }
    }
}
