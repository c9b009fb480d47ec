//! API keys on the request path: lookups cached for at most [`KEY_CACHE_TTL`], which is also
//! the bound on how long a revoked key keeps working on an instance that did not revoke it (the
//! revoking instance evicts at once). No database round trip happens for a cached key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tollgate_filters::{keys, ErrorKind, GatewayError};

use crate::ledger::{KeyAuth, Ledger};

pub const KEY_CACHE_TTL: Duration = Duration::from_secs(4);
/// How long a cached lookup may stand in for the ledger while it cannot answer.
const STALE_FOR: Duration = Duration::from_secs(600);
/// After a lookup failed, cached keys are served without asking the ledger for this long.
const RETRY_LOOKUP_AFTER: Duration = Duration::from_secs(2);
/// How often `last_used_at` is written for a key that is used continuously.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

struct Cached {
    auth: Option<KeyAuth>,
    at: Instant,
    touched: Instant,
}

#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, Cached>>,
    /// Bumped by every eviction (a revocation on this instance). A lookup that started before
    /// one does not fill the cache: what it read may be the key as it was before the revoke,
    /// and caching that would let the key work for another `KEY_CACHE_TTL`.
    evictions: std::sync::atomic::AtomicU64,
    /// When (ms) a lookup last failed because the ledger did not answer.
    failed_at: AtomicI64,
}

impl KeyCache {
    /// Resolves a presented key: 401 for a malformed, unknown or revoked one.
    /// The live key presented, or 401: unknown, revoked, or past its expiry (checked on every
    /// request, cached or not, so a key stops at its expiry to the millisecond).
    pub async fn resolve(&self, ledger: &Ledger, presented: &str) -> Result<KeyAuth, GatewayError> {
        let auth = self.lookup(ledger, presented).await?;
        if let Some(at) = auth.expires_at.filter(|at| *at <= crate::clock::now_ms()) {
            let when = tollgate_filters::time::http_date(at.div_euclid(1000));
            return Err(GatewayError::new(
                ErrorKind::Authentication,
                format!("this API key expired on {when}"),
            ));
        }
        Ok(auth)
    }

    async fn lookup(&self, ledger: &Ledger, presented: &str) -> Result<KeyAuth, GatewayError> {
        let unauthorized =
            || GatewayError::new(ErrorKind::Authentication, "invalid or revoked API key");
        if !keys::well_formed(presented) {
            return Err(unauthorized());
        }
        let hash = keys::hash(presented);
        let now = Instant::now();
        let mut touch = None;
        if let Ok(mut map) = self.entries.lock() {
            if let Some(c) = map.get_mut(&hash) {
                if now.duration_since(c.at) < KEY_CACHE_TTL {
                    if let Some(a) = &c.auth {
                        if now.duration_since(c.touched) > TOUCH_EVERY {
                            c.touched = now;
                            touch = Some(a.key_id.clone());
                        }
                    }
                    let auth = c.auth.clone();
                    drop(map);
                    if let Some(id) = touch {
                        spawn_touch(ledger.clone(), id);
                    }
                    return auth.ok_or_else(unauthorized);
                }
            }
        }
        // The ledger cannot answer: a key seen lately keeps working through the outage, so
        // that an account with a funded credit lease is still served (DESIGN.md, Rules:
        // Faults). A revocation made meanwhile takes effect once the ledger answers again.
        // While the last lookup failed recently, no request waits out the store's timeout again.
        if self.ledger_failing() {
            if let Some(auth) = self.stale(&hash, now) {
                return auth.ok_or_else(unauthorized);
            }
        }
        let epoch = self.epoch();
        let auth = match ledger.key_auth(&hash).await {
            Ok(a) => a,
            Err(e) => {
                self.failed_at
                    .store(crate::clock::now_ms(), Ordering::Relaxed);
                return self.stale(&hash, now).ok_or(e)?.ok_or_else(unauthorized);
            }
        };
        self.fill(hash, auth.clone(), epoch, now);
        if let Some(a) = &auth {
            spawn_touch(ledger.clone(), a.key_id.clone());
        }
        auth.ok_or_else(unauthorized)
    }

    /// Whether a lookup failed within the last [`RETRY_LOOKUP_AFTER`].
    fn ledger_failing(&self) -> bool {
        crate::clock::now_ms() - self.failed_at.load(Ordering::Relaxed)
            < RETRY_LOOKUP_AFTER.as_millis() as i64
    }

    /// A cached lookup up to [`STALE_FOR`] old, for when the ledger cannot answer.
    fn stale(&self, hash: &str, now: Instant) -> Option<Option<KeyAuth>> {
        let map = self.entries.lock().ok()?;
        let c = map.get(hash)?;
        (now.duration_since(c.at) < STALE_FOR).then(|| c.auth.clone())
    }

    fn epoch(&self) -> u64 {
        self.evictions.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Caches a lookup that started at eviction count `epoch`, unless an eviction came since.
    fn fill(&self, hash: String, auth: Option<KeyAuth>, epoch: u64, now: Instant) {
        let Ok(mut map) = self.entries.lock() else {
            return;
        };
        // Checked under the lock that `evict` also takes: no eviction can fall in between.
        if self.epoch() != epoch {
            return;
        }
        if map.len() > 100_000 {
            map.retain(|_, c| now.duration_since(c.at) < KEY_CACHE_TTL);
        }
        map.insert(
            hash,
            Cached {
                auth,
                at: now,
                touched: now,
            },
        );
    }

    pub fn evict(&self, hash: &str) {
        if let Ok(mut map) = self.entries.lock() {
            self.evictions
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            map.remove(hash);
        }
    }

    /// Forgets every cached key of an account (its plan changed on this instance: the next
    /// request reads the new plan; other instances within [`KEY_CACHE_TTL`]).
    pub fn evict_account(&self, account_id: &str) {
        if let Ok(mut map) = self.entries.lock() {
            self.evictions
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            map.retain(|_, c| c.auth.as_ref().is_none_or(|a| a.account_id != account_id));
        }
    }
}

fn spawn_touch(ledger: Ledger, key_id: String) {
    tokio::spawn(async move {
        if let Err(e) = ledger.touch_key(&key_id, crate::clock::now_ms()).await {
            tracing::debug!("could not record key use: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> KeyAuth {
        KeyAuth {
            key_id: "key_1".into(),
            account_id: "usr_1".into(),
            plan: "free".into(),
            requests_per_hour: None,
            requests_per_day: None,
            expires_at: None,
            allowed_models: None,
            allowed_tools: None,
            limits: Default::default(),
        }
    }

    fn cached(c: &KeyCache, hash: &str) -> bool {
        c.entries.lock().unwrap().contains_key(hash)
    }

    #[test]
    fn a_lookup_in_flight_across_a_revocation_does_not_fill_the_cache() {
        let c = KeyCache::default();
        let now = Instant::now();
        // A lookup starts, the key is revoked (evicted) meanwhile, the lookup ends.
        let epoch = c.epoch();
        c.evict("h");
        c.fill("h".into(), Some(auth()), epoch, now);
        assert!(!cached(&c, "h"), "the stale lookup must not be cached");
        // A lookup that started after the revocation is cached as usual.
        let epoch = c.epoch();
        c.fill("h".into(), None, epoch, now);
        assert!(cached(&c, "h"));
    }
}
