//! Refreshing the cached tool lists of live tool servers (`[mcp] refresh_secs`), so that
//! `tools/list` on `/mcp` never fans out to the upstreams per request and still follows what
//! they offer. A server that fails the check keeps its last list (and is counted); it is the
//! operator's to suspend.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tollgate_filters::mcp::ServiceState;

use super::ledger_when_connected;
use crate::runtime::Shared;
use crate::tool_servers::check::live_check;

pub struct ToolListService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for ToolListService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let shared = &self.0;
        let Some(ledger) = ledger_when_connected(shared, &mut shutdown).await else {
            return;
        };
        loop {
            let every = shared.runtime.load().config.mcp.refresh;
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let live = match ledger.services(None, Some(ServiceState::Live)).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!("tool-list refresh: cannot read the services: {e}");
                    continue;
                }
            };
            for s in live {
                let event = match live_check(shared, &s.upstream_url).await {
                    Ok(tools) => {
                        let now = crate::clock::now_ms();
                        let r = ledger.set_service_status(
                            &s.slug,
                            &[ServiceState::Live],
                            ServiceState::Live,
                            Some(&tools),
                            now,
                        );
                        match r.await {
                            Ok(_) => "refreshed",
                            Err(e) => {
                                tracing::warn!(slug = %s.slug, "tool-list refresh: {e}");
                                "refresh_failed"
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(slug = %s.slug, "tool-list refresh: {}", e.message);
                        "refresh_failed"
                    }
                };
                shared
                    .metrics
                    .mcp_events
                    .with_label_values(&[&s.slug, event])
                    .inc();
            }
            shared.mcp.invalidate();
            // Not faster than once a second whatever the config says.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
