//! The live check of a tool server: what registration, a new URL, approval and the periodic
//! tool-list refresh all ask of it before its tools are offered.

use serde_json::Value;
use tollgate_filters::mcp::checked_tools;
use tollgate_filters::{ErrorKind, GatewayError};

use super::cache::legacy_key;
use super::client::Upstream;
use crate::runtime::Shared;

/// The live check: the server's era found out (`server/discover`, else `initialize` and
/// `notifications/initialized`), then `tools/list`; the tools, or 422
/// `tool_server_check_failed` with the reason in words. An address the SSRF guard refuses is
/// the client's mistake (400).
pub async fn live_check(shared: &Shared, url: &str) -> Result<Value, GatewayError> {
    let timeout = shared.runtime.load().config.mcp.call_timeout;
    let failed = |why: String| {
        GatewayError::new(
            ErrorKind::ToolServerCheckFailed,
            format!("the tool server at upstream_url failed the live check: it {why}"),
        )
    };
    let up = Upstream::resolve(shared, url, timeout)
        .await
        .map_err(|f| GatewayError::invalid(format!("upstream_url: {f}")))?;
    // A fresh session: the check must see the server as it is now.
    shared.mcp.drop_session(url);
    shared.mcp.drop_session(&legacy_key(url));
    up.open().await.map_err(|f| failed(f.0))?;
    let reply = up
        .request("tools/list", Some(b"{}"))
        .await
        .map_err(|f| failed(f.0))?;
    if let Some(e) = reply.error() {
        let msg = e["message"].as_str().unwrap_or("an error");
        return Err(failed(format!(
            "answered tools/list with a JSON-RPC error ({msg})"
        )));
    }
    let tools =
        checked_tools(&reply.result_tree()).map_err(|why| failed(why.replacen("its ", "", 1)))?;
    Ok(Value::Array(tools))
}
