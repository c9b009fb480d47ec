//! Accounts: [`signup`], [`login`] and logout (the dashboard session), `me` ([`me`]), API keys ([`keys`], cached on the request
//! path by `auth::key_cache`), usage reports ([`usage`]), passwords ([`passwords`]) and the login
//! throttle ([`throttle`]). The handlers answer `/api/v1/auth/*`, `/api/v1/keys*` and
//! `/api/v1/usage`, authenticated by an API key or a dashboard session.

pub mod key_settings;
pub mod keys;
pub mod login;
pub mod me;
pub mod passwords;
pub mod signup;
pub mod throttle;
pub mod usage;

use serde_json::json;
use tollgate_filters::credits::to_credits;

use crate::ledger::Account;

pub use crate::auth::{random_bytes, random_id, SESSION_COOKIE};
pub const SESSION_TTL_SECS: i64 = 7 * 86_400;
/// Account bodies are small; anything larger is garbage.
pub const MAX_ACCOUNT_BODY: usize = 16 * 1024;

/// An account as the API shows it (`me`, signup, the admin view).
pub fn account_json(a: &Account) -> serde_json::Value {
    json!({"user_id": a.user_id, "credits": to_credits(a.balance), "plan": a.plan, "email": a.email})
}
