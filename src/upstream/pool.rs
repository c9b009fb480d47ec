//! One provider's pool: a `pingora-load-balancing` LoadBalancer over its resolved endpoints,
//! the round-robin pick with failover order, passive ejection after consecutive failures, and
//! the pacing of its active health check.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::upstreams::peer::HttpPeer;
use pingora_load_balancing::selection::RoundRobin;
use pingora_load_balancing::{Backend, LoadBalancer};

use super::health;
use crate::config::{EndpointUrl, Provider};

/// One resolved address of one endpoint URL.
#[derive(Debug)]
pub struct Endpoint {
    pub url: EndpointUrl,
    pub addr: SocketAddr,
    consecutive_failures: AtomicU32,
    /// Milliseconds since the pool's epoch until which the endpoint is ejected (0 = not).
    ejected_until_ms: AtomicU64,
}

pub struct Pool {
    pub provider: Provider,
    pub lb: LoadBalancer<RoundRobin>,
    pub endpoints: HashMap<SocketAddr, Arc<Endpoint>>,
    /// The same endpoints in config order.
    pub order: Vec<Arc<Endpoint>>,
    pub has_health_check: bool,
    pub health_interval: Duration,
    /// Endpoint names that did not resolve when the pool was built (their endpoints are
    /// missing): the background resolution asks again sooner.
    pub unresolved: usize,
    epoch: Instant,
    next_check_ms: AtomicU64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("provider", &self.provider.name)
            .finish()
    }
}

impl Pool {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn is_ejected(&self, e: &Endpoint) -> bool {
        let until = e.ejected_until_ms.load(Ordering::Relaxed);
        until != 0 && self.now_ms() < until
    }

    fn usable(&self, e: &Endpoint) -> bool {
        self.lb.backends().ready(&backend_of(e.addr)) && !self.is_ejected(e)
    }

    /// Endpoints to try for one request: the load balancer's pick first (one round-robin step
    /// per request), then the pool's other usable endpoints in config order for failover.
    pub fn usable_endpoints(&self) -> Vec<Arc<Endpoint>> {
        let mut out: Vec<Arc<Endpoint>> = Vec::with_capacity(self.order.len());
        let first = self.lb.select_with(b"", 256, |b: &Backend, healthy| {
            healthy && self.endpoint_of(b).is_some_and(|e| !self.is_ejected(e))
        });
        if let Some(e) = first.and_then(|b| self.endpoint_of(&b).cloned()) {
            out.push(e);
        }
        for e in &self.order {
            if self.usable(e) && !out.iter().any(|o| o.addr == e.addr) {
                out.push(e.clone());
            }
        }
        out
    }

    pub fn has_usable_endpoint(&self) -> bool {
        self.order.iter().any(|e| self.usable(e))
    }

    fn endpoint_of(&self, b: &Backend) -> Option<&Arc<Endpoint>> {
        b.addr.as_inet().and_then(|a| self.endpoints.get(a))
    }

    pub fn record_success(&self, e: &Endpoint) {
        e.consecutive_failures.store(0, Ordering::Relaxed);
        e.ejected_until_ms.store(0, Ordering::Relaxed);
    }

    /// Counts a failed request; returns true when this failure ejected the endpoint.
    pub fn record_failure(&self, e: &Endpoint) -> bool {
        let n = e.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.provider.eject_after_failures {
            e.consecutive_failures.store(0, Ordering::Relaxed);
            let until = self.now_ms() + self.provider.eject_for.as_millis() as u64;
            e.ejected_until_ms.store(until.max(1), Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Runs the active check when its interval has passed. Called by the health service.
    pub async fn health_tick(&self) {
        if !self.has_health_check {
            return;
        }
        let now = self.now_ms();
        if now < self.next_check_ms.load(Ordering::Relaxed) {
            return;
        }
        self.next_check_ms.store(
            now + self.health_interval.as_millis() as u64,
            Ordering::Relaxed,
        );
        self.lb.backends().run_health_check(true).await;
    }

    /// The addresses the pool was built from, as [`super::resolve::Resolved::addresses`]
    /// lists them, for the background resolution to tell whether a name moved.
    pub fn addresses(&self) -> Vec<(String, SocketAddr)> {
        self.order
            .iter()
            .map(|e| (e.url.host.clone(), e.addr))
            .collect()
    }

    /// Keeps what the passive health check knows of the addresses both pools have (failures
    /// counted, an ejection) when a pool replaces this one after its names moved.
    pub fn carry_from(&mut self, old: &Pool) {
        self.epoch = old.epoch;
        for e in &self.order {
            if let Some(o) = old.endpoints.get(&e.addr) {
                e.consecutive_failures.store(
                    o.consecutive_failures.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
                e.ejected_until_ms.store(
                    o.ejected_until_ms.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
            }
        }
    }

    pub fn endpoint_health(&self) -> Vec<(String, bool)> {
        self.order
            .iter()
            .map(|e| (e.addr.to_string(), self.usable(e)))
            .collect()
    }

    /// The Pingora peer for one endpoint: TLS with SNI when the URL is https. `read_timeout`
    /// bounds every read from the upstream at the socket (the forwarding loop's own deadlines
    /// are tighter; this is the floor under them).
    pub fn peer(
        &self,
        e: &Endpoint,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> HttpPeer {
        let sni = if e.url.tls {
            e.url.host.clone()
        } else {
            String::new()
        };
        let mut peer = HttpPeer::new(e.addr, e.url.tls, sni);
        if e.url.tls {
            // The provider's `ca_file` roots and client certificate, parsed at config load:
            // two `Arc` clones, no file read. `verify_cert` and `verify_hostname` stay on
            // (Pingora's defaults), as in the health check's peer (`upstream::health`).
            peer.options.ca = self.provider.tls.ca.clone();
            peer.client_cert_key = self.provider.tls.client_cert_key.clone();
        }
        peer.options.connection_timeout = Some(connect_timeout);
        peer.options.total_connection_timeout = Some(connect_timeout);
        peer.options.idle_timeout = Some(Duration::from_secs(60));
        peer.options.read_timeout = Some(read_timeout);
        peer
    }
}

fn backend_of(addr: SocketAddr) -> Backend {
    Backend {
        addr: pingora::protocols::l4::socket::SocketAddr::Inet(addr),
        weight: 1,
        ext: Default::default(),
    }
}

pub fn build_pool(
    provider: &Provider,
    resolved: Vec<(EndpointUrl, SocketAddr)>,
) -> Result<Pool, String> {
    let addrs: Vec<SocketAddr> = resolved.iter().map(|(_, a)| *a).collect();
    let mut lb = LoadBalancer::<RoundRobin>::try_from_iter(addrs.iter().copied())
        .map_err(|e| format!("provider {}: {e}", provider.name))?;
    let has_health_check = provider.health_check.is_some();
    let mut health_interval = Duration::from_secs(5);
    if let Some(hc) = &provider.health_check {
        lb.set_health_check(Box::new(health::pool_check(provider, &resolved, hc)?));
        health_interval = Duration::from_millis(hc.interval_ms);
    }
    let order: Vec<Arc<Endpoint>> = resolved
        .into_iter()
        .map(|(url, addr)| {
            Arc::new(Endpoint {
                url,
                addr,
                consecutive_failures: AtomicU32::new(0),
                ejected_until_ms: AtomicU64::new(0),
            })
        })
        .collect();
    let endpoints = order.iter().map(|e| (e.addr, e.clone())).collect();
    Ok(Pool {
        provider: provider.clone(),
        lb,
        endpoints,
        order,
        has_health_check,
        health_interval,
        unresolved: 0,
        epoch: Instant::now(),
        next_check_ms: AtomicU64::new(0),
    })
}
