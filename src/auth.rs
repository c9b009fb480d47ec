//! Who is calling: API keys (cached), dashboard sessions, passwords, the admin token, and the
//! login throttle.
//!
//! Key lookups are cached for at most [`KEY_CACHE_TTL`], which is also the bound on how long a
//! revoked key keeps working on an instance that did not revoke it (the revoking instance evicts
//! at once). No database round trip happens for a cached key.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use tollgate_filters::{keys, ErrorKind, GatewayError};

use crate::store::{KeyAuth, Ledger, NewKey};

pub const KEY_CACHE_TTL: Duration = Duration::from_secs(4);
/// How often `last_used_at` is written for a key that is used continuously.
const TOUCH_EVERY: Duration = Duration::from_secs(60);
pub const SESSION_COOKIE: &str = "tg_session";
pub const SESSION_TTL_SECS: i64 = 7 * 86_400;

#[derive(Debug, Clone)]
pub enum Caller {
    Guest,
    Key(KeyAuth),
    /// A dashboard session (account id); never accepted on the chat path.
    Session(String),
}

impl Caller {
    pub fn account_id(&self) -> Option<&str> {
        match self {
            Caller::Guest => None,
            Caller::Key(k) => Some(&k.account_id),
            Caller::Session(a) => Some(a),
        }
    }
}

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
        if let Err(e) = ledger.touch_key(&key_id, crate::now_ms()).await {
            tracing::debug!("could not record key use: {e}");
        }
    });
}

/// A fresh key: the secret (shown once) and what is stored.
pub fn new_key(name: &str) -> Result<(String, NewKey), GatewayError> {
    let secret = keys::format_key(random_bytes(96))
        .ok_or_else(|| GatewayError::internal("could not generate a key"))?;
    let id = format!("key_{}", random_id(16)?);
    Ok((
        secret.clone(),
        NewKey {
            id,
            name: name.to_owned(),
            prefix: keys::display_prefix(&secret),
            hash: keys::hash(&secret),
        },
    ))
}

pub fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

pub fn random_id(len: usize) -> Result<String, GatewayError> {
    keys::base62(random_bytes(len * 2 + 16), len)
        .ok_or_else(|| GatewayError::internal("could not generate an id"))
}

pub fn hash_password(password: &str) -> Result<String, GatewayError> {
    let salt = SaltString::encode_b64(&random_bytes(16))
        .map_err(|e| GatewayError::internal(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| GatewayError::internal(format!("password hashing failed: {e}")))
}

pub fn verify_password(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Failed logins per e-mail and per client IP in a sliding 15-minute window.
#[derive(Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

const THROTTLE_WINDOW: Duration = Duration::from_secs(15 * 60);
const MAX_FAILS_PER_EMAIL: usize = 5;
const MAX_FAILS_PER_IP: usize = 20;

impl LoginThrottle {
    fn keys(email: &str, ip: Option<IpAddr>) -> [(String, usize); 2] {
        [
            (format!("e:{email}"), MAX_FAILS_PER_EMAIL),
            (
                format!("i:{}", ip.map(|i| i.to_string()).unwrap_or_default()),
                MAX_FAILS_PER_IP,
            ),
        ]
    }

    /// 429 when this e-mail or IP has failed too often recently.
    pub fn check(&self, email: &str, ip: Option<IpAddr>) -> Result<(), GatewayError> {
        let now = Instant::now();
        let Ok(mut map) = self.failures.lock() else {
            return Ok(());
        };
        for (k, max) in Self::keys(email, ip) {
            if let Some(v) = map.get_mut(&k) {
                v.retain(|t| now.duration_since(*t) < THROTTLE_WINDOW);
                if v.len() >= max {
                    let oldest = v.first().copied().unwrap_or(now);
                    let retry = THROTTLE_WINDOW
                        .saturating_sub(now.duration_since(oldest))
                        .as_secs()
                        .max(1);
                    return Err(GatewayError::new(
                        ErrorKind::RateLimited { retry_after: retry },
                        "too many failed logins; wait before trying again",
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn failed(&self, email: &str, ip: Option<IpAddr>) {
        let now = Instant::now();
        if let Ok(mut map) = self.failures.lock() {
            for (k, _) in Self::keys(email, ip) {
                map.entry(k).or_default().push(now);
            }
        }
    }

    pub fn succeeded(&self, email: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&format!("e:{email}"));
        }
    }
}

/// The value of one cookie from a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}
