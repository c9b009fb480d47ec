//! Where providers' host names are resolved again: every `[server] dns_refresh_secs` for each
//! pool with a name among its endpoints (sooner while a name does not resolve), and a pool
//! whose addresses changed is rebuilt and swapped into the runtime, so a provider that moves
//! (a CDN rotating its addresses, a name edited in `/etc/hosts`) is followed without a reload.
//! Requests in flight keep the pool they started with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::runtime::{Runtime, Shared};
use crate::upstream::{self, resolve::Resolved, Pool};

/// How soon a name that did not resolve is asked again (at most the refresh interval).
const RETRY_UNRESOLVED: Duration = Duration::from_secs(2);

pub struct NameService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for NameService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        // When each provider is next resolved; a pool built by a reload starts its own count.
        let mut due: HashMap<String, Instant> = HashMap::new();
        // Providers whose last resolution failed, so a failure is logged once, its end too.
        let mut failing: HashMap<String, usize> = HashMap::new();
        loop {
            let rt = self.0.runtime.load_full();
            let every = rt.config.server.dns_refresh;
            let now = Instant::now();
            for (name, pool) in &rt.pools {
                if !upstream::resolve::has_names(&pool.provider) {
                    continue;
                }
                let first = if pool.unresolved > 0 {
                    every.min(RETRY_UNRESOLVED)
                } else {
                    every
                };
                let next = *due.entry(name.clone()).or_insert(now + first);
                if now < next {
                    continue;
                }
                let resolved = upstream::resolve(&pool.provider).await;
                let result = self.follow(pool, resolved, &mut failing);
                let wait = if result == "failed" {
                    every.min(RETRY_UNRESOLVED)
                } else {
                    every
                };
                due.insert(name.clone(), Instant::now() + wait);
                self.0
                    .metrics
                    .dns_resolutions
                    .with_label_values(&[name, result])
                    .inc();
            }
            due.retain(|name, _| rt.pools.contains_key(name));
            drop(rt);
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }
}

impl NameService {
    /// Logs what changed and swaps in a pool built on the new addresses; the result's label.
    fn follow(
        &self,
        pool: &Arc<Pool>,
        resolved: Resolved,
        failing: &mut HashMap<String, usize>,
    ) -> &'static str {
        let name = &pool.provider.name;
        let failed = resolved.failed.len();
        let was_failing = failing.get(name).copied().unwrap_or(0);
        if failed > 0 && failed != was_failing {
            for (host, reason) in &resolved.failed {
                tracing::warn!(provider = %name, %host, "cannot resolve; its endpoints are left out until it does: {reason}");
            }
        } else if failed == 0 && was_failing > 0 {
            tracing::info!(provider = %name, "every endpoint name resolves again");
        }
        if failed > 0 {
            failing.insert(name.clone(), failed);
        } else {
            failing.remove(name);
        }
        let addresses = resolved.addresses();
        let changed = addresses != pool.addresses();
        if changed {
            self.swap(pool, resolved);
        }
        match (failed > 0, changed) {
            (true, _) => "failed",
            (false, true) => "changed",
            (false, false) => "same",
        }
    }

    /// Replaces `old` in the runtime by a pool on the new addresses, unless a reload replaced
    /// it meanwhile (its own resolution is newer).
    fn swap(&self, old: &Arc<Pool>, resolved: Resolved) {
        let name = &old.provider.name;
        let before: Vec<String> = old.order.iter().map(|e| e.addr.to_string()).collect();
        let after: Vec<String> = resolved
            .endpoints
            .iter()
            .map(|(_, a)| a.to_string())
            .collect();
        let unresolved = resolved.failed.len();
        let mut pool = match upstream::build_pool(&old.provider, resolved.endpoints) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(provider = %name, "cannot rebuild the pool on its new addresses: {e}");
                return;
            }
        };
        pool.carry_from(old);
        pool.unresolved = unresolved;
        let pool = Arc::new(pool);
        let mut swapped = false;
        self.0.runtime.rcu(|cur| {
            swapped = false;
            let Some(current) = cur.pools.get(name) else {
                return cur.clone();
            };
            if !Arc::ptr_eq(current, old) {
                return cur.clone();
            }
            let mut pools = cur.pools.clone();
            pools.insert(name.clone(), pool.clone());
            swapped = true;
            Arc::new(Runtime {
                config: cur.config.clone(),
                pools,
            })
        });
        if swapped {
            tracing::info!(provider = %name, ?before, ?after, "endpoint addresses changed; pool rebuilt");
        }
    }
}
