//! API keys on the request path: lookups cached for at most [`KEY_CACHE_TTL`], which is also
//! the bound on how long a revoked key keeps working on an instance that did not revoke it (the
//! revoking instance evicts at once). No database round trip happens for a cached key, one
//! happens for all the requests that present a new key at once, and misses are remembered
//! apart in bounded memory ([`super::unknown_keys`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::IntCounterVec;
use tokio::sync::OnceCell;
use tollgate_filters::{keys, ErrorKind, GatewayError};

use super::unknown_keys::{Refusals, UnknownKeys};
use crate::ledger::{KeyAuth, Ledger, StoreError};

pub const KEY_CACHE_TTL: Duration = Duration::from_secs(4);
/// How long a cached lookup may stand in for the ledger while it cannot answer.
const STALE_FOR: Duration = Duration::from_secs(600);
/// After a lookup failed, cached keys are served without asking the ledger for this long.
const RETRY_LOOKUP_AFTER: Duration = Duration::from_secs(2);
/// How often `last_used_at` is written for a key that is used continuously.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// A key the ledger knows (misses are kept apart, in [`UnknownKeys`]).
struct Cached {
    auth: KeyAuth,
    at: Instant,
    touched: Instant,
}

/// One lookup's answer, shared by the requests that wait for it.
type Lookup = Arc<OnceCell<Result<Option<KeyAuth>, String>>>;

pub struct KeyCache {
    /// Lookups that reached the ledger, by result.
    lookups: IntCounterVec,
    entries: Mutex<HashMap<String, Cached>>,
    /// Keys the ledger did not know, and refused keys per client address.
    unknown: UnknownKeys,
    refusals: Refusals,
    /// Lookups in flight, by key hash.
    inflight: Mutex<HashMap<String, Lookup>>,
    /// Bumped by every eviction (a revocation on this instance). A lookup that started before
    /// one does not fill the cache: what it read may be the key as it was before the revoke,
    /// and caching that would let the key work for another `KEY_CACHE_TTL`.
    evictions: std::sync::atomic::AtomicU64,
    /// When (ms) a lookup last failed because the ledger did not answer.
    failed_at: AtomicI64,
}

impl KeyCache {
    pub fn new(lookups: IntCounterVec) -> KeyCache {
        KeyCache {
            lookups,
            entries: Mutex::default(),
            unknown: UnknownKeys::default(),
            refusals: Refusals::default(),
            inflight: Mutex::default(),
            evictions: Default::default(),
            failed_at: AtomicI64::default(),
        }
    }

    /// Resolves a presented key: 401 for a malformed, unknown or revoked one, or past its
    /// expiry (checked on every request, cached or not, so a key stops at its expiry to the
    /// millisecond); 429 for a key not seen lately from an address that sent `limit` unknown
    /// keys this minute ([`Refusals`]). `presenter` says who presents it (the client's
    /// address and its limit): asked only for a key that is not cached, so a served key's
    /// request does no address work.
    pub async fn resolve(
        &self,
        ledger: &Ledger,
        presented: &str,
        presenter: impl Fn() -> (Option<IpAddr>, u64),
    ) -> Result<KeyAuth, GatewayError> {
        let auth = self.lookup(ledger, presented, &presenter).await;
        if let Err(e) = &auth {
            if e.kind == ErrorKind::Authentication {
                self.refusals.count(presenter().0, crate::clock::now_ms());
            }
        }
        let auth = auth?;
        if let Some(at) = auth.expires_at.filter(|at| *at <= crate::clock::now_ms()) {
            let when = tollgate_filters::time::http_date(at.div_euclid(1000));
            return Err(GatewayError::new(
                ErrorKind::Authentication,
                format!("this API key expired on {when}"),
            ));
        }
        Ok(auth)
    }

    async fn lookup(
        &self,
        ledger: &Ledger,
        presented: &str,
        presenter: &impl Fn() -> (Option<IpAddr>, u64),
    ) -> Result<KeyAuth, GatewayError> {
        let unauthorized =
            || GatewayError::new(ErrorKind::Authentication, "invalid or revoked API key");
        // Neither shape nor a remembered miss costs a lookup.
        if !keys::well_formed(presented) {
            return Err(unauthorized());
        }
        let hash = keys::hash(presented);
        let now = Instant::now();
        if let Some(auth) = self.fresh(ledger, &hash, now) {
            return Ok(auth);
        }
        if self.unknown.contains(&hash) {
            return Err(unauthorized());
        }
        // A key this instance has not seen lately, from an address that has been sending
        // unknown ones: not looked up until its minute ends (a key seen before is, so that a
        // flood behind a shared address does not lock out the clients already served).
        if self.stale(&hash, now).is_none() {
            let (from, limit) = presenter();
            if let Some(retry_after) = self.refusals.over(from, limit, crate::clock::now_ms()) {
                return Err(GatewayError::new(
                    ErrorKind::RateLimited { retry_after },
                    "too many invalid API keys from this address; retry after the minute",
                ));
            }
        }
        // The ledger cannot answer: a key seen lately keeps working through the outage, so
        // that an account with a funded credit lease is still served (DESIGN.md, Rules:
        // Faults). A revocation made meanwhile takes effect once the ledger answers again.
        // While the last lookup failed recently, no request waits out the store's timeout again.
        if self.ledger_failing() {
            if let Some(auth) = self.stale(&hash, now) {
                return Ok(auth);
            }
        }
        let auth = match self.fetch(ledger, &hash, now).await {
            Ok(a) => a,
            Err(e) => {
                self.failed_at
                    .store(crate::clock::now_ms(), Ordering::Relaxed);
                return Ok(self.stale(&hash, now).ok_or(e)?);
            }
        };
        auth.ok_or_else(unauthorized)
    }

    /// A cached key younger than [`KEY_CACHE_TTL`]; its use recorded now and then.
    fn fresh(&self, ledger: &Ledger, hash: &str, now: Instant) -> Option<KeyAuth> {
        let mut map = self.entries.lock().ok()?;
        let c = map
            .get_mut(hash)
            .filter(|c| now.duration_since(c.at) < KEY_CACHE_TTL)?;
        let touch = (now.duration_since(c.touched) > TOUCH_EVERY).then(|| {
            c.touched = now;
            c.auth.key_id.clone()
        });
        let auth = c.auth.clone();
        drop(map);
        if let Some(id) = touch {
            spawn_touch(ledger.clone(), id);
        }
        Some(auth)
    }

    /// One ledger lookup for every request that presents the same uncached key at once (a new
    /// key's first burst): the first asks, the others wait for its answer. Fills the caches.
    async fn fetch(
        &self,
        ledger: &Ledger,
        hash: &str,
        now: Instant,
    ) -> Result<Option<KeyAuth>, StoreError> {
        let (cell, epoch) = {
            let mut inflight = self.inflight.lock().map_err(|_| poisoned())?;
            let cell = inflight.entry(hash.to_owned()).or_default().clone();
            (cell, self.epoch())
        };
        let answer = cell
            .get_or_init(|| async {
                let got = ledger.key_auth(hash).await.map_err(|e| e.0);
                let result = match &got {
                    Ok(Some(_)) => "found",
                    Ok(None) => "unknown",
                    Err(_) => "error",
                };
                self.lookups.with_label_values(&[result]).inc();
                if let Ok(found) = &got {
                    self.fill(hash, found.clone(), epoch, now);
                    if let Some(a) = found {
                        spawn_touch(ledger.clone(), a.key_id.clone());
                    }
                }
                got
            })
            .await
            .clone();
        if let Ok(mut inflight) = self.inflight.lock() {
            if inflight.get(hash).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                inflight.remove(hash);
            }
        }
        answer.map_err(StoreError)
    }

    /// Whether a lookup failed within the last [`RETRY_LOOKUP_AFTER`].
    fn ledger_failing(&self) -> bool {
        crate::clock::now_ms() - self.failed_at.load(Ordering::Relaxed)
            < RETRY_LOOKUP_AFTER.as_millis() as i64
    }

    /// A key cached up to [`STALE_FOR`] ago, for when the ledger cannot answer.
    fn stale(&self, hash: &str, now: Instant) -> Option<KeyAuth> {
        let map = self.entries.lock().ok()?;
        let c = map.get(hash)?;
        (now.duration_since(c.at) < STALE_FOR).then(|| c.auth.clone())
    }

    fn epoch(&self) -> u64 {
        self.evictions.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Caches a lookup that started at eviction count `epoch`, unless an eviction came since:
    /// a key found, or a miss among the unknown keys.
    fn fill(&self, hash: &str, auth: Option<KeyAuth>, epoch: u64, now: Instant) {
        let Some(auth) = auth else {
            self.unknown.insert(hash, now);
            return;
        };
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
            hash.to_owned(),
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
        // A lookup in flight may have read the key before the revocation: later requests
        // ask again instead of waiting for its answer.
        if let Ok(mut inflight) = self.inflight.lock() {
            inflight.clear();
        }
    }

    /// Forgets every cached key of an account (its plan changed on this instance: the next
    /// request reads the new plan; other instances within [`KEY_CACHE_TTL`]).
    pub fn evict_account(&self, account_id: &str) {
        if let Ok(mut map) = self.entries.lock() {
            self.evictions
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            map.retain(|_, c| c.auth.account_id != account_id);
        }
    }
}

fn poisoned() -> StoreError {
    StoreError("the key cache's lock is poisoned".into())
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
            org_member: None,
            log_payloads: false,
            cache_breakpoints: false,
            response_cache: false,
        }
    }

    fn cache() -> KeyCache {
        let opts = prometheus::Opts::new("lookups", "lookups");
        KeyCache::new(IntCounterVec::new(opts, &["result"]).unwrap())
    }

    fn cached(c: &KeyCache, hash: &str) -> bool {
        c.entries.lock().unwrap().contains_key(hash)
    }

    #[test]
    fn a_lookup_in_flight_across_a_revocation_does_not_fill_the_cache() {
        let c = cache();
        let now = Instant::now();
        // A lookup starts, the key is revoked (evicted) meanwhile, the lookup ends.
        let epoch = c.epoch();
        c.evict("h");
        c.fill("h", Some(auth()), epoch, now);
        assert!(!cached(&c, "h"), "the stale lookup must not be cached");
        // A lookup that started after the revocation is cached as usual.
        let epoch = c.epoch();
        c.fill("h", Some(auth()), epoch, now);
        assert!(cached(&c, "h"));
    }

    #[test]
    fn a_miss_is_kept_apart_from_the_keys_found() {
        let c = cache();
        let miss = "ab".repeat(32);
        c.fill(&miss, None, c.epoch(), Instant::now());
        assert!(!cached(&c, &miss));
        assert!(c.unknown.contains(&miss));
    }
}
