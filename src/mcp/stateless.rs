//! The agent endpoints in the 2026-07-28 era (`tollgate_filters::mcp::era`): a request that
//! says it is stateless is checked (its `_meta`, its routing headers, its version, the methods
//! that era removed) before anything else, `server/discover` is answered here, and results go
//! out with `resultType`, the gateway in `_meta`, and on lists how long they may be cached.
//! Errors get the era's HTTP statuses (400, 404); a 2025 request is answered as before.

use crate::request::Session;
use serde_json::value::RawValue;
use serde_json::Value;
use tollgate_filters::mcp::era::{self, Headers};
use tollgate_filters::mcp::{declared_capabilities, RpcError, METHOD_NOT_FOUND};

use crate::ledger::mcp::Service;
use crate::runtime::Shared;
use crate::tool_servers::client::Upstream;

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

/// The answer to `server/discover` (`capabilities`: [`declared`]); a tools list may be cached
/// for `ttl_ms`.
pub fn discover(ttl_ms: u64, capabilities: Value) -> Result<Box<RawValue>, RpcError> {
    Ok(raw(era::discover_result(
        env!("CARGO_PKG_VERSION"),
        ttl_ms,
        capabilities,
    )))
}

/// What an endpoint declares to an agent (of the 2025 era: `legacy`) at `server/discover` or
/// `initialize`: on `/mcp/{slug}` (`own`: its service) the tools and what the server itself
/// declared of the methods passed through to it (found out when not known yet: one request);
/// on `/mcp`, or when the server cannot be asked now, the tools alone.
pub async fn declared(shared: &Shared, own: Option<&Service>, legacy: bool) -> Value {
    let mut server = Value::Null;
    if let Some(s) = own {
        let timeout = shared.runtime.load().config.mcp.call_timeout;
        if let Ok(up) = Upstream::resolve(shared, &s.upstream_url, timeout).await {
            match up.for_agent(legacy).capabilities().await {
                Ok(c) => server = c,
                Err(f) => tracing::debug!(slug = %s.slug, "capabilities unknown: {f}"),
            }
        }
    }
    declared_capabilities(&server, !legacy)
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
