//! Events sent to customers on this instance: the checks of what the request path noticed
//! and the sweep (`webhooks::detect`), and the delivery loop with the refresh of which
//! wallets have endpoints (`webhooks::deliver`), once the ledger is connected.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::Shared;
use crate::webhooks::{deliver, detect};

pub struct WebhookService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for WebhookService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(ledger) = super::ledger_when_connected(&self.0, &mut shutdown).await else {
            return;
        };
        let checks = self.0.webhooks.take_receiver().map(|rx| {
            let (shared, ledger, shutdown) = (self.0.clone(), ledger.clone(), shutdown.clone());
            tokio::spawn(detect::run(shared, ledger, rx, shutdown))
        });
        deliver::run(self.0.clone(), ledger, shutdown).await;
        if let Some(c) = checks {
            c.abort();
        }
    }
}
