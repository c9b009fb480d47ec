//! The runtime state a request reads: the validated config, the catalog and the upstream
//! pools. It sits behind an `ArcSwap` so that SIGHUP swaps it whole while requests in flight
//! keep the snapshot they started with.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::Config;
use crate::metrics::Metrics;
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
}

impl Shared {
    pub fn new(runtime: Runtime, config_path: PathBuf) -> Arc<Shared> {
        Arc::new(Shared {
            runtime: ArcSwap::from_pointee(runtime),
            config_path,
            metrics: Metrics::new(),
        })
    }
}
