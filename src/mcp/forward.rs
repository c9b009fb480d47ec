//! A tool server's own answer passed on to the agent unbilled: one service's methods other
//! than `tools/call` on `/mcp/{slug}` (resources, prompts, completion), and a response as the
//! server wrote it (its result, or its error with its own code and message).

use serde_json::value::RawValue;
use serde_json::Value;
use tollgate_filters::mcp::{RpcError, INTERNAL_ERROR};
use tollgate_filters::GatewayError;

use crate::ledger::mcp::Service;
use crate::runtime::Shared;
use crate::tool_servers::client::Upstream;
use crate::tool_servers::reply::Reply;

/// A method of one service passed through unbilled, in the agent's era when the server speaks
/// both (`legacy`: a 2025 agent): its response's `result` or `error`.
pub async fn forward(
    shared: &Shared,
    s: &Service,
    method: &str,
    params: Option<&RawValue>,
    legacy: bool,
) -> Result<Box<RawValue>, RpcError> {
    let timeout = shared.runtime.load().config.mcp.call_timeout;
    let up_err = |why: String| {
        let e = GatewayError::upstream(format!("tool server `{}` {why}", s.slug));
        RpcError::from_error(Value::Null, &e)
    };
    let up = Upstream::resolve(shared, &s.upstream_url, timeout)
        .await
        .map_err(|f| up_err(f.0))?;
    let reply = up
        .for_agent(legacy)
        .request(method, params.map(|p| p.get().as_bytes()))
        .await
        .map_err(|f| up_err(f.0))?;
    passthrough(reply)
}

/// An upstream response as ours: its result as sent, or its error with its own code and
/// message.
pub fn passthrough(reply: Reply) -> Result<Box<RawValue>, RpcError> {
    if let Some(e) = reply.error() {
        let mut err = RpcError::new(
            Value::Null,
            e["code"].as_i64().unwrap_or(INTERNAL_ERROR),
            e["message"].as_str().unwrap_or("error"),
        );
        err.data = e.get("data").cloned();
        return Err(err);
    }
    Ok(reply.into_result().unwrap_or_else(null))
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).unwrap_or_default()
}
