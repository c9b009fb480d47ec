//! The agent endpoints in the 2026-07-28 era (`tollgate_filters::mcp::era`): a request that
//! says it is stateless is checked (its `_meta`, its routing headers, its version, the methods
//! that era removed) before anything else, `server/discover` is answered here, and results go
//! out with `resultType`, the gateway in `_meta`, and on lists how long they may be cached.
//! Errors get the era's HTTP statuses (400, 404); a 2025 request is answered as before.

use pingora::proxy::Session;
use serde_json::value::RawValue;
use serde_json::Value;
use tollgate_filters::mcp::era::{self, Headers};
use tollgate_filters::mcp::{RpcError, METHOD_NOT_FOUND};

/// The routing headers of the request.
pub fn headers(session: &Session) -> Headers<'_> {
    let h = &session.req_header().headers;
    let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    Headers {
        version: get("mcp-protocol-version"),
        method: get("mcp-method"),
        name: get("mcp-name"),
    }
}

/// The answer to `server/discover`; a tools list may be cached for `ttl_ms`.
pub fn discover(ttl_ms: u64) -> Result<Box<RawValue>, RpcError> {
    Ok(raw(era::discover_result(env!("CARGO_PKG_VERSION"), ttl_ms)))
}

/// `subscriptions/listen` is refused by name, on both endpoints and in both eras: it is a
/// long-lived stream of change notifications, which every instance would have to hold open for
/// every client (and relay from every tool server); lists say how long they may be kept
/// (`ttlMs`) instead.
pub fn no_listen() -> RpcError {
    RpcError::new(
        Value::Null,
        METHOD_NOT_FOUND,
        "subscriptions/listen is not offered: poll tools/list after its ttlMs",
    )
}

/// A 2026 answer: the result in the era's shape, or the error with its status.
pub fn shape(
    method: &str,
    answer: Result<Box<RawValue>, RpcError>,
    ttl_ms: u64,
) -> (u16, Result<Box<RawValue>, RpcError>) {
    match answer {
        Ok(result) => {
            let v: Value = serde_json::from_str(result.get()).unwrap_or(Value::Null);
            let shaped = era::stateless_result(method, v, ttl_ms, env!("CARGO_PKG_VERSION"));
            (200, Ok(raw(shaped)))
        }
        Err(e) => (era::http_status(e.code), Err(e)),
    }
}

fn raw(v: Value) -> Box<RawValue> {
    // A Value always serializes; `null` is the unreachable fallback.
    serde_json::value::to_raw_value(&v)
        .or_else(|_| RawValue::from_string("null".to_owned()))
        .unwrap_or_default()
}
