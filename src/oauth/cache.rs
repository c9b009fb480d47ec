//! OAuth access tokens on the MCP endpoints, resolved to the key their grant acts as and cached
//! for at most [`KEY_CACHE_TTL`], the same bound keys have: a grant revoked on another instance
//! (or its key revoked) stops working here within 5 s; the revoking instance forgets at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tollgate_filters::{keys, ErrorKind, GatewayError};

use super::tokens::{self, ACCESS_PREFIX};
use crate::auth::key_cache::KEY_CACHE_TTL;
use crate::ledger::{KeyAuth, Ledger};

/// How often a grant in continuous use has its `last_used_at` written.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// A live access token: the key it acts as, its grant and what it was issued for.
#[derive(Debug, Clone)]
pub struct TokenAuth {
    pub key: KeyAuth,
    pub grant_id: String,
    /// `/mcp` (every MCP endpoint) or `/mcp/{slug}` (that one).
    pub resource: String,
    pub expires_at: i64,
}

struct Cached {
    auth: Option<TokenAuth>,
    at: Instant,
    touched: Instant,
}

#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<String, Cached>>,
    /// Bumped by every eviction: a lookup that started before one does not fill the cache
    /// (what it read may predate the revocation).
    evictions: AtomicU64,
}

/// Whether a bearer value is shaped like an access token (checked before any lookup).
pub fn is_access_token(value: &str) -> bool {
    value.len() == ACCESS_PREFIX.len() + 40
        && value.starts_with(ACCESS_PREFIX)
        && value[ACCESS_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric())
}

fn refused(message: &str) -> GatewayError {
    GatewayError::new(ErrorKind::Authentication, message)
}

impl TokenCache {
    /// The live token presented, or 401: unknown, revoked (its grant or its key), or expired
    /// (checked on every use, cached or not, to the millisecond).
    pub async fn resolve(
        &self,
        ledger: &Ledger,
        presented: &str,
    ) -> Result<TokenAuth, GatewayError> {
        if !is_access_token(presented) {
            return Err(refused("invalid or revoked access token"));
        }
        let hash = keys::hash(presented);
        let now = Instant::now();
        let cached = self.entries.lock().ok().and_then(|mut map| {
            let c = map.get_mut(&hash)?;
            if now.duration_since(c.at) >= KEY_CACHE_TTL {
                return None;
            }
            let touch = c.auth.is_some() && now.duration_since(c.touched) > TOUCH_EVERY;
            if touch {
                c.touched = now;
            }
            Some((c.auth.clone(), touch))
        });
        let auth = match cached {
            Some((auth, touch)) => {
                if let (true, Some(a)) = (touch, &auth) {
                    spawn_touch(ledger.clone(), a);
                }
                auth
            }
            // The ledger not answering is 503 (retry), never 401: a client told its token is
            // bad would start its sign-in over.
            None => {
                let epoch = self.evictions.load(Ordering::SeqCst);
                let auth = self.read(ledger, &hash).await?;
                self.fill(hash, auth.clone(), epoch, now);
                if let Some(a) = &auth {
                    spawn_touch(ledger.clone(), a);
                }
                auth
            }
        };
        let auth = auth.ok_or_else(|| refused("invalid or revoked access token"))?;
        if auth.expires_at <= crate::clock::now_ms() {
            return Err(refused("the access token has expired; refresh it"));
        }
        if let Some(at) = auth
            .key
            .expires_at
            .filter(|at| *at <= crate::clock::now_ms())
        {
            let when = tollgate_filters::time::http_date(at.div_euclid(1000));
            return Err(refused(&format!("the grant's API key expired on {when}")));
        }
        Ok(auth)
    }

    async fn read(&self, ledger: &Ledger, hash: &str) -> Result<Option<TokenAuth>, GatewayError> {
        let Some(row) = tokens::access(ledger, hash).await? else {
            return Ok(None);
        };
        let Some(key) = ledger.key_auth(&row.key_hash).await? else {
            return Ok(None);
        };
        Ok(Some(TokenAuth {
            key,
            grant_id: row.grant_id,
            resource: row.resource,
            expires_at: row.expires_at,
        }))
    }

    fn fill(&self, hash: String, auth: Option<TokenAuth>, epoch: u64, now: Instant) {
        let Ok(mut map) = self.entries.lock() else {
            return;
        };
        if self.evictions.load(Ordering::SeqCst) != epoch {
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

    /// Forgets every cached token of a grant (revoked on this instance).
    pub fn evict_grant(&self, grant_id: &str) {
        if let Ok(mut map) = self.entries.lock() {
            self.evictions.fetch_add(1, Ordering::SeqCst);
            map.retain(|_, c| c.auth.as_ref().is_none_or(|a| a.grant_id != grant_id));
        }
    }
}

fn spawn_touch(ledger: Ledger, auth: &TokenAuth) {
    let (grant, key) = (auth.grant_id.clone(), auth.key.key_id.clone());
    tokio::spawn(async move {
        let now = crate::clock::now_ms();
        if let Err(e) = super::store::touch_grant(&ledger, &grant, now).await {
            tracing::debug!("could not record grant use: {e}");
        }
        if let Err(e) = ledger.touch_key(&key, now).await {
            tracing::debug!("could not record key use: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_access_token_shapes_are_looked_up() {
        let t = format!("tga_{}", "a".repeat(40));
        assert!(is_access_token(&t));
        assert!(!is_access_token(&format!("tgr_{}", "a".repeat(40))));
        assert!(!is_access_token(&format!("tg_{}", "a".repeat(40))));
        assert!(!is_access_token(&format!("tga_{}!", "a".repeat(39))));
    }
}
