//! Accounts: signup, login and sessions ([`signup`]), API keys ([`keys`], cached on the request
//! path by [`key_cache`]), usage reports ([`usage`]), passwords ([`passwords`]) and the login
//! throttle ([`throttle`]). The handlers answer `/api/v1/auth/*`, `/api/v1/keys*` and
//! `/api/v1/usage`, authenticated by an API key or a dashboard session.

pub mod key_cache;
pub mod keys;
pub mod me;
pub mod passwords;
pub mod signup;
pub mod throttle;
pub mod usage;

use serde_json::json;
use tollgate_filters::credits::to_credits;
use tollgate_filters::{keys as key_format, GatewayError};

use crate::ledger::Account;

pub const SESSION_COOKIE: &str = "tg_session";
pub const SESSION_TTL_SECS: i64 = 7 * 86_400;
/// Account bodies are small; anything larger is garbage.
pub const MAX_ACCOUNT_BODY: usize = 16 * 1024;

/// The value of one cookie from a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

pub fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

/// A random base62 id of `len` characters (account, key and session ids).
pub fn random_id(len: usize) -> Result<String, GatewayError> {
    key_format::base62(random_bytes(len * 2 + 16), len)
        .ok_or_else(|| GatewayError::internal("could not generate an id"))
}

/// An account as the API shows it (`me`, signup, the admin view).
pub fn account_json(a: &Account) -> serde_json::Value {
    json!({"user_id": a.user_id, "credits": to_credits(a.balance), "plan": a.plan, "email": a.email})
}
