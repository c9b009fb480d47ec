//! Where sticky routing's affinities are kept: in Redis when the deployment has one (every
//! instance sees the endpoint another one chose), else in a bounded in-process map swept in
//! the background. Neither can fail a request: a store that does not answer within the counter
//! store's timeout means "no affinity", and a write is made off the request path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use prometheus::{IntCounterVec, Opts, Registry};

use crate::limits::store::Counters;

/// The endpoint and model that last served a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affinity {
    /// The model's pinned id.
    pub model: String,
    /// The endpoint as both instances name it: its URL's authority and the address it resolved
    /// to (one name may resolve to several endpoints).
    pub authority: String,
    pub addr: SocketAddr,
}

impl Affinity {
    fn encode(&self) -> String {
        [self.model.as_str(), &self.authority, &self.addr.to_string()].join("\n")
    }

    fn decode(s: &str) -> Option<Affinity> {
        let mut parts = s.split('\n');
        let (model, authority, addr) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Affinity {
            model: model.to_owned(),
            authority: authority.to_owned(),
            addr: addr.parse().ok()?,
        })
    }
}

/// How a sticky request was routed, for `tollgate_sticky_routes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served where its affinity pointed.
    Hit,
    /// No affinity was known (a first turn, an expired one, a store that did not answer).
    Miss,
    /// Served elsewhere than its affinity (failover, or its model no longer a candidate): the
    /// affinity moved.
    Moved,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Miss => "miss",
            Outcome::Moved => "moved",
        }
    }
}

/// The affinities of one instance's view: Redis, or the in-process map.
pub struct Affinities {
    /// Conversation key → affinity and when it expires (ms of the gateway's clock).
    local: Mutex<HashMap<String, (Affinity, i64)>>,
    routes: IntCounterVec,
}

impl Affinities {
    pub fn new(registry: &Registry) -> Affinities {
        let routes = IntCounterVec::new(
            Opts::new(
                "tollgate_sticky_routes_total",
                "Sticky requests by outcome: hit (served where its conversation's cache is), miss (no affinity known), moved (served elsewhere; the affinity followed)",
            ),
            &["outcome"],
        )
        .expect("static metric definition");
        registry
            .register(Box::new(routes.clone()))
            .expect("unique metric");
        Affinities {
            local: Mutex::default(),
            routes,
        }
    }

    pub fn count(&self, outcome: Outcome) {
        self.routes.with_label_values(&[outcome.label()]).inc();
    }

    /// The affinity of conversation `key`, if one is known and the store answers in time.
    pub async fn get(&self, store: Counters<'_>, key: &str) -> Option<Affinity> {
        let redis = match store.redis() {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!("sticky routing without affinity: {}", e.0);
                return None;
            }
        };
        let Some((mut conn, prefix)) = redis else {
            let now = crate::clock::now_ms();
            let map = self.local.lock().ok()?;
            return map
                .get(key)
                .filter(|(_, expires)| *expires > now)
                .map(|(a, _)| a.clone());
        };
        let mut get = redis::cmd("GET");
        get.arg(redis_key(&prefix, key));
        match store
            .timed(get.query_async::<Option<String>>(&mut conn))
            .await
        {
            Ok(v) => v.as_deref().and_then(Affinity::decode),
            Err(e) => {
                tracing::debug!("sticky routing without affinity: {}", e.0);
                None
            }
        }
    }

    /// Records that `a` served conversation `key`, for `ttl` from now: in Redis by a task of
    /// its own (the request does not wait for it; true when one was spawned), else in the map
    /// unless it holds `max_entries` already.
    pub fn set(
        &self,
        store: Counters<'_>,
        key: &str,
        a: &Affinity,
        ttl: Duration,
        max_entries: usize,
    ) -> bool {
        let Ok(redis) = store.redis() else {
            return false;
        };
        let Some((mut conn, prefix)) = redis else {
            let expires = crate::clock::now_ms() + ttl.as_millis() as i64;
            if let Ok(mut map) = self.local.lock() {
                if let Some(slot) = map.get_mut(key) {
                    *slot = (a.clone(), expires);
                } else if map.len() < max_entries {
                    map.insert(key.to_owned(), (a.clone(), expires));
                }
            }
            return false;
        };
        let mut set = redis::cmd("SET");
        set.arg(redis_key(&prefix, key))
            .arg(a.encode())
            .arg("PX")
            .arg(ttl.as_millis() as u64);
        let timeout = store.timeout;
        tokio::spawn(async move {
            let write = set.query_async::<()>(&mut conn);
            match tokio::time::timeout(timeout, write).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!("sticky routing: affinity not stored: {e}"),
                Err(_) => tracing::debug!("sticky routing: affinity not stored in time"),
            }
        });
        true
    }

    /// Background: drops the in-process affinities that expired; returns how many are left.
    pub fn sweep(&self) -> usize {
        let now = crate::clock::now_ms();
        let Ok(mut map) = self.local.lock() else {
            return 0;
        };
        map.retain(|_, (_, expires)| *expires > now);
        map.len()
    }
}

/// The Redis key of a conversation, under the instance's prefix as the counters' keys are.
fn redis_key(prefix: &str, key: &str) -> String {
    [prefix, ":sticky:", key].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(model: &str) -> Affinity {
        Affinity {
            model: model.into(),
            authority: "api.example.com".into(),
            addr: "10.0.0.1:443".parse().unwrap(),
        }
    }

    fn local() -> Counters<'static> {
        Counters {
            redis: None,
            timeout: Duration::from_millis(250),
        }
    }

    #[test]
    fn affinities_read_back_as_written() {
        let x = a("m-1");
        assert_eq!(Affinity::decode(&x.encode()), Some(x));
        assert_eq!(Affinity::decode("m\nhost"), None);
        assert_eq!(Affinity::decode("m\nhost\nnot an address"), None);
    }

    #[tokio::test]
    async fn the_in_process_map_expires_caps_and_sweeps() {
        let s = Affinities::new(&Registry::new());
        assert!(!s.set(local(), "k1", &a("m-1"), Duration::from_secs(60), 2));
        s.set(local(), "k2", &a("m-2"), Duration::from_millis(1), 2);
        s.set(local(), "k3", &a("m-3"), Duration::from_secs(60), 2);
        assert_eq!(s.get(local(), "k1").await, Some(a("m-1")));
        assert_eq!(s.get(local(), "k3").await, None, "past max_entries");
        s.set(local(), "k1", &a("m-9"), Duration::from_secs(60), 2);
        assert_eq!(
            s.get(local(), "k1").await,
            Some(a("m-9")),
            "a known one moves"
        );
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.get(local(), "k2").await, None, "expired");
        assert_eq!(s.sweep(), 1);
        s.set(local(), "k3", &a("m-3"), Duration::from_secs(60), 2);
        assert_eq!(
            s.get(local(), "k3").await,
            Some(a("m-3")),
            "room after the sweep"
        );
    }
}
