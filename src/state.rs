//! The runtime state a request reads: the validated config, the catalog and the upstream
//! pools. It sits behind an `ArcSwap` so that SIGHUP swaps it whole while requests in flight
//! keep the snapshot they started with.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::auth::{KeyCache, LoginThrottle};
use crate::config::{Config, StorageConfig};
use crate::leases::Leases;
use crate::limits::{FailureMode, Limiter};
use crate::metrics::Metrics;
use crate::store::Ledger;
use crate::upstream::{self, Pool};

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
            pools.insert(p.name.clone(), Arc::new(upstream::build_pool(p, resolved)?));
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
    pub throttle: LoginThrottle,
    pub admin_token: Option<String>,
    pub limiter: Limiter,
    pub leases: Leases,
    /// Storage settings as read at start (not reloadable).
    pub storage: StorageConfig,
}

impl Shared {
    pub fn new(runtime: Runtime, config_path: PathBuf) -> Arc<Shared> {
        let storage = runtime.config.raw.storage.clone();
        let admin_token = std::env::var(&runtime.config.raw.server.admin_token_env)
            .ok()
            .filter(|t| !t.is_empty());
        Arc::new(Shared {
            runtime: ArcSwap::from_pointee(runtime),
            config_path,
            metrics: Metrics::new(),
            ledger: tokio::sync::OnceCell::new(),
            keys: KeyCache::default(),
            throttle: LoginThrottle::default(),
            admin_token,
            limiter: Limiter::new(
                !storage.redis_url.is_empty(),
                FailureMode::parse(&storage.redis_failure_mode).unwrap_or(FailureMode::FailOpen),
                std::time::Duration::from_millis(storage.redis_timeout_ms),
                storage.redis_prefix.clone(),
                storage.rate_limit_lease,
            ),
            leases: Leases::new(
                storage.lease_holds,
                storage.lease_sync_ms,
                storage.lease_idle_secs,
                storage.hold_ttl_secs,
            ),
            storage,
        })
    }
}
