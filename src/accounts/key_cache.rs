//! API keys on the request path: lookups cached for at most [`KEY_CACHE_TTL`], which is also
//! the bound on how long a revoked key keeps working on an instance that did not revoke it (the
//! revoking instance evicts at once). No database round trip happens for a cached key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tollgate_filters::{keys, ErrorKind, GatewayError};

use crate::ledger::{KeyAuth, Ledger};

pub const KEY_CACHE_TTL: Duration = Duration::from_secs(4);
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
}

impl KeyCache {
    /// Resolves a presented key: 401 for a malformed, unknown or revoked one.
    pub async fn resolve(&self, ledger: &Ledger, presented: &str) -> Result<KeyAuth, GatewayError> {
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
        let auth = ledger.key_auth(&hash).await?;
        if let Ok(mut map) = self.entries.lock() {
            if map.len() > 100_000 {
                map.retain(|_, c| now.duration_since(c.at) < KEY_CACHE_TTL);
            }
            map.insert(
                hash,
                Cached {
                    auth: auth.clone(),
                    at: now,
                    touched: now,
                },
            );
        }
        if let Some(a) = &auth {
            spawn_touch(ledger.clone(), a.key_id.clone());
        }
        auth.ok_or_else(unauthorized)
    }

    pub fn evict(&self, hash: &str) {
        if let Ok(mut map) = self.entries.lock() {
            map.remove(hash);
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
