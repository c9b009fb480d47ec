//! Active health checks of every pool the current runtime holds, and the sweep of idle
//! upstream connections (`upstream::idle`) once a second.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// Runs active health checks for whichever pools the current runtime holds, so pools built
/// by a reload are checked without registering new services.
pub struct HealthService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for HealthService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut ticks = 0u32;
        loop {
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(50) {
                self.0.connector.sweep();
            }
            let rt = self.0.runtime.load_full();
            for pool in rt.pools.values() {
                pool.health_tick().await;
            }
            drop(rt);
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    }
}
