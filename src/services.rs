//! Server assembly and the background services: the one health-check loop over every pool,
//! and the SIGHUP reload.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{Server, ShutdownWatch};
use pingora::services::background::{background_service, BackgroundService};
use pingora::services::listening::Service;

use crate::config::{self, Config};
use crate::metrics::MetricsApp;
use crate::proxy::Gateway;
use crate::state::{Runtime, Shared};

/// Runs active health checks for whichever pools the current runtime holds, so pools built
/// by a reload are checked without registering new services.
pub struct HealthService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for HealthService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
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

/// Reloads the config file on SIGHUP: providers, models, aliases and timeouts. A file that
/// does not validate is refused and the running config stays. Requests in flight keep the
/// snapshot they started with.
pub struct ReloadService(pub Arc<Shared>);

impl ReloadService {
    pub async fn reload(&self) -> Result<(), String> {
        let cfg = config::load_file(&self.0.config_path).map_err(|errs| {
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let rt = Runtime::build(cfg).await?;
        self.0.runtime.store(Arc::new(rt));
        Ok(())
    }
}

#[async_trait]
impl BackgroundService for ReloadService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hup = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("cannot listen for SIGHUP, reload disabled: {e}");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                got = hup.recv() => {
                    if got.is_none() { return; }
                    match self.reload().await {
                        Ok(()) => {
                            self.0.metrics.reloads.with_label_values(&["ok"]).inc();
                            tracing::info!(path = %self.0.config_path.display(), "config reloaded");
                        }
                        Err(e) => {
                            self.0.metrics.reloads.with_label_values(&["refused"]).inc();
                            tracing::error!(path = %self.0.config_path.display(), "config reload refused, keeping the running config: {e}");
                        }
                    }
                }
            }
        }
    }
}

/// Connects the ledger store inside Pingora's long-lived runtime (retrying until it answers),
/// publishes it to the request path, then refunds expired credit holds on an interval.
pub struct LedgerService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for LedgerService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let url = self.0.storage.database_url.clone();
        let mut wait = Duration::from_millis(200);
        let ledger = loop {
            match crate::store::Ledger::connect(&url).await {
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
        let _ = self.0.ledger.set(ledger.clone());
        let every = Duration::from_secs_f64(self.0.storage.hold_reap_interval_secs);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(every) => {}
            }
            match ledger.release_expired_holds(crate::now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    released = n,
                    "refunded expired credit holds (an instance stopped mid-request)"
                ),
                Err(e) => tracing::error!("could not release expired holds: {e}"),
            }
        }
    }
}

/// Runs the credit-lease rounds (src/leases.rs) every `lease_sync_ms`, or sooner when a large
/// batch waits, and returns every lease at shutdown.
pub struct LeaseService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for LeaseService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let leases = &self.0.leases;
        if !leases.enabled() {
            return;
        }
        let ledger = loop {
            if let Some(l) = self.0.ledger.get() {
                break l.clone();
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(leases.sync_every) => {}
                _ = leases.wake.notified() => {}
            }
            leases.tick(&ledger).await;
        }
        leases.release_all(&ledger).await;
        tracing::info!("credit leases returned");
    }
}

/// Connects the shared counter store (Redis) inside Pingora's runtime, retrying until it
/// answers. The connection manager reconnects by itself afterwards.
pub struct CounterService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for CounterService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let url = self.0.storage.redis_url.clone();
        if url.is_empty() {
            return;
        }
        let client = match redis::Client::open(url.as_str()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("bad redis_url, rate limits stay in-process or closed: {e}");
                return;
            }
        };
        let timeout = self.0.storage.redis_timeout_ms;
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
                    let _ = self.0.limiter.redis.set(conn);
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
        // Expired admission leases give their unused admissions back.
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
            self.0.limiter.sweep().await;
        }
    }
}

/// Builds the Pingora server with the proxy, metrics, health and reload services.
pub fn build_server(config: Config, config_path: PathBuf) -> Result<Server, String> {
    // Name resolution at start needs a runtime; it is thrown away afterwards and holds no
    // pools (those are created lazily inside Pingora's runtimes).
    let boot = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let listen = config.listen;
    let metrics_listen = config.metrics_listen;
    let threads = config.raw.server.threads;
    let grace = config.raw.server.graceful_shutdown_secs;
    let runtime = boot.block_on(Runtime::build(config))?;
    drop(boot);
    let shared = Shared::new(runtime, config_path);

    // Every service gets its own runtime of `threads` workers unless it says otherwise; the
    // background services are light, so one thread each, and the proxy gets `server.threads`.
    // Fewer runtime threads also means fewer malloc arenas, i.e. lower resident memory.
    let conf = ServerConf {
        threads: 1,
        grace_period_seconds: Some(grace),
        graceful_shutdown_timeout_seconds: Some(grace),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Opt::default(), conf);
    server.bootstrap();

    let mut proxy =
        pingora::proxy::http_proxy_service(&server.configuration, Gateway::new(shared.clone()));
    proxy.add_tcp(&listen.to_string());
    proxy.threads = Some(threads);
    server.add_service(proxy);

    if let Some(addr) = metrics_listen {
        let mut metrics = Service::new("metrics".to_string(), MetricsApp(shared.clone()));
        metrics.add_tcp(&addr.to_string());
        metrics.threads = Some(1);
        server.add_service(metrics);
    }
    server.add_service(background_service(
        "health checks",
        HealthService(shared.clone()),
    ));
    server.add_service(background_service(
        "config reload",
        ReloadService(shared.clone()),
    ));
    server.add_service(background_service(
        "counters",
        CounterService(shared.clone()),
    ));
    server.add_service(background_service(
        "credit leases",
        LeaseService(shared.clone()),
    ));
    server.add_service(background_service("ledger", LedgerService(shared)));
    Ok(server)
}
