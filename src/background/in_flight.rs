//! Renewing this instance's slots under `concurrent_requests` limits in Redis, every third of
//! `storage.in_flight_ttl_secs`: a live request keeps its slot however long it runs, and a
//! killed instance's slots expire within the TTL (src/limits/in_flight.rs).

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

pub struct InFlightService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for InFlightService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let limiter = &self.0.limiter;
        let every = limiter.in_flight.ttl() / 3;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(every) => {}
            }
            limiter.in_flight.renew(&limiter.counters()).await;
        }
    }
}
