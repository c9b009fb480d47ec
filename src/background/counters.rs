//! Connecting the shared counter store (Redis) and returning expired reservations of admissions.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;

/// Connects the shared counter store (Redis) inside Pingora's runtime, retrying until it
/// answers. The connection manager reconnects by itself afterwards.
pub struct CounterService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for CounterService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let (Some(url), Some(counter)) = (&self.0.storage.redis_url, &self.0.limiter.redis) else {
            return;
        };
        let client = match redis::Client::open(url.as_str()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("bad redis_url, rate limits stay in-process or closed: {e}");
                return;
            }
        };
        let timeout = self.0.storage.redis_timeout.as_millis() as u64;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Duration::from_millis(timeout.max(500)))
            .set_response_timeout(Duration::from_millis(timeout.max(500)))
            .set_number_of_retries(2)
            .set_max_delay(2000);
        let mut wait = Duration::from_millis(200);
        loop {
            match redis::aio::ConnectionManager::new_with_config(client.clone(), config.clone())
                .await
            {
                Ok(conn) => {
                    counter.connected(conn);
                    tracing::info!("rate-limit counters on redis");
                    break;
                }
                Err(e) => {
                    tracing::warn!("redis unreachable, retrying in {wait:?}: {e}");
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        // Expired reservations give their unused admissions back.
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            counter.sweep().await;
        }
    }
}
