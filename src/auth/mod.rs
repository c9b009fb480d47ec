//! Who is calling: an API key (looked up through [`key_cache`]; a flood of invalid ones
//! refused cheaply by [`unknown_keys`]), a dashboard session, the
//! admin token, or nobody (the guest tier), and the rate-limit identity that follows from it
//! ([`caller`]), what a key's model allowlist lets it use ([`allowlist`]), and a keyed request
//! against its key's and plan's per-minute and in-flight limits ([`key_limits`]). The route table (`proxy::table`) says which of these a route accepts;
//! dispatch resolves the caller with this module before the handler runs.

pub mod allowlist;
pub mod caller;
pub mod key_cache;
pub mod key_limits;
pub mod unknown_keys;

use tollgate_filters::GatewayError;

/// The dashboard's session cookie.
pub const SESSION_COOKIE: &str = "tg_session";

pub fn random_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|_| rand::random::<u8>()).collect()
}

/// A random base62 id of `len` characters (account, key, session and instance ids).
pub fn random_id(len: usize) -> Result<String, GatewayError> {
    tollgate_filters::keys::base62(random_bytes(len * 2 + 16), len)
        .ok_or_else(|| GatewayError::internal("could not generate an id"))
}

/// The value of one cookie from a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}
