//! What a request reads: the config snapshot with its upstream pools ([`Runtime`], swapped whole
//! on SIGHUP while requests in flight keep the snapshot they started with), and the state
//! shared by every service of the process ([`Shared`]: stores, caches, limiter, leases).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::auth::key_cache::KeyCache;
use crate::config::{Config, Storage};
use crate::ledger::Ledger;
use crate::limits::Limiter;
use crate::metering::leases::Leases;
use crate::metering::Meter;
use crate::metrics::Metrics;
use crate::upstream::{self, Connections, Pool};

pub struct Runtime {
    pub config: Config,
    pub pools: HashMap<String, Arc<Pool>>,
}

impl Runtime {
    /// Resolves every provider's hosts and builds its pool.
    pub async fn build(config: Config) -> Result<Runtime, String> {
        let mut pools = HashMap::new();
        for p in &config.providers {
            let resolved = upstream::resolve(p).await;
            for (host, reason) in &resolved.failed {
                tracing::warn!(provider = %p.name, %host, "cannot resolve; its endpoints are left out until it resolves (tried again every dns_refresh_secs): {reason}");
            }
            let mut pool = upstream::build_pool(p, resolved.endpoints)?;
            pool.unresolved = resolved.failed.len();
            pools.insert(p.name.clone(), Arc::new(pool));
        }
        Ok(Runtime { config, pools })
    }
}

/// Everything shared by the services of one process.
pub struct Shared {
    pub runtime: ArcSwap<Runtime>,
    pub config_path: PathBuf,
    pub metrics: Metrics,
    /// Set once by the ledger service, inside Pingora's long-lived runtime.
    pub ledger: tokio::sync::OnceCell<Ledger>,
    pub keys: KeyCache,
    /// OAuth access tokens on the MCP endpoints, cached as briefly as keys (`oauth::cache`).
    pub oauth_tokens: crate::oauth::cache::TokenCache,
    pub limiter: Limiter,
    pub leases: Leases,
    /// Storage settings as read at start (not reloadable).
    pub storage: Storage,
    /// Upstream connections: made by Pingora's transport connector (TCP, TLS), kept idle
    /// between exchanges (`upstream::idle`); the HTTP/1 exchange on them is `upstream::wire`.
    pub connector: Connections,
    /// Unix seconds at start: the `created` of every model in `GET /v1/models`.
    pub started: i64,
    /// Password hashes running on the blocking pool, one per core (`accounts::passwords`).
    pub hashing: tokio::sync::Semaphore,
    /// Token counts running on the blocking pool: one fewer than the cores (at least one), so
    /// that counting never takes every core from the proxy (`pipeline::tokenize`).
    pub counting: tokio::sync::Semaphore,
    /// Settlements that failed after serving, retried until they commit
    /// (`background::unsettled`).
    pub unsettled: crate::metering::unsettled::Unsettled,
    /// The tool marketplace's per-instance caches (live services, upstream sessions).
    pub mcp: crate::tool_servers::cache::McpCache,
    /// Stored responses waiting for their grouped commit (`POST /v1/responses`).
    pub stored_responses: Arc<crate::ledger::responses::ResponseQueue>,
    /// Events sent to customers: which wallets have endpoints, the queue off the request path.
    pub webhooks: crate::webhooks::Events,
    /// Traces' sampler and export queue, when `[telemetry] otlp_endpoint` is set (read at
    /// start; `background::traces` exports).
    pub tracer: Option<crate::telemetry::queue::Tracer>,
    /// Sticky routing's affinities: in Redis when configured, else in-process
    /// (`crate::routing`).
    pub sticky: crate::routing::store::Affinities,
    /// The response cache's requests in flight on this instance (single flight).
    pub response_flights: crate::response_cache::flight::Flights,
}

impl Shared {
    pub fn new(runtime: Runtime, config_path: PathBuf) -> Arc<Shared> {
        let storage = runtime.config.storage.clone();
        let instance = crate::auth::random_id(10).unwrap_or_else(|_| "instance".into());
        let metrics = Metrics::new();
        let keys = KeyCache::new(metrics.key_lookups.clone());
        let webhooks =
            crate::webhooks::Events::new(runtime.config.webhooks.queue_capacity, &metrics.registry);
        let sticky = crate::routing::store::Affinities::new(&metrics.registry);
        let tracer = runtime
            .config
            .telemetry
            .traces
            .as_ref()
            .map(|t| crate::telemetry::queue::Tracer::new(t, &instance));
        Arc::new(Shared {
            runtime: ArcSwap::from_pointee(runtime),
            config_path,
            metrics,
            ledger: tokio::sync::OnceCell::new(),
            keys,
            oauth_tokens: crate::oauth::cache::TokenCache::default(),
            limiter: Limiter::new(
                storage
                    .redis_url
                    .as_ref()
                    .map(|_| (storage.redis_prefix.clone(), storage.rate_limit_reserve)),
                storage.redis_failure_mode,
                storage.redis_timeout,
                storage.in_flight_ttl,
            ),
            leases: Leases::new(
                storage.lease_holds,
                storage.lease_sync,
                storage.lease_idle,
                storage.hold_ttl,
                instance,
            ),
            unsettled: crate::metering::unsettled::Unsettled::new(storage.max_unsettled),
            storage,
            connector: Connections::default(),
            started: crate::clock::now_secs(),
            hashing: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
            counting: tokio::sync::Semaphore::new(
                std::thread::available_parallelism()
                    .map_or(1, |n| n.get().saturating_sub(1).max(1)),
            ),
            mcp: crate::tool_servers::cache::McpCache::default(),
            stored_responses: Arc::default(),
            webhooks,
            tracer,
            sticky,
            response_flights: Default::default(),
        })
    }

    /// The ledger, or 503 while the store is still connecting.
    pub fn ledger(&self) -> Result<&Ledger, GatewayError> {
        self.ledger.get().ok_or_else(|| {
            GatewayError::new(
                ErrorKind::ServiceUnavailable,
                "the ledger store is not connected yet; retry shortly",
            )
        })
    }

    /// The stores credit metering works against.
    pub fn meter(&self) -> Result<Meter<'_>, GatewayError> {
        Ok(Meter {
            ledger: self.ledger()?,
            limiter: &self.limiter,
            leases: &self.leases,
            metrics: &self.metrics,
            unsettled: &self.unsettled,
            hold_ttl: self.storage.hold_ttl,
            events: &self.webhooks,
        })
    }
}
