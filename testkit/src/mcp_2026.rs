//! How the fake tool server in its 2026-07-28-only mode
//! ([`FakeToolServer::stateless`](crate::FakeToolServer::stateless)) judges a request as that
//! specification says: its `_meta`, its routing headers, its version, the methods it removed;
//! and how it asks for input before a call (`ToolMode::InputRequired`).

use serde_json::{json, Value};

/// Why a 2026-only server refuses a request: the era's checks (`_meta`, headers, version,
/// the methods it removed).
pub(crate) fn stateless_refusal(
    req: &crate::openai::Recorded,
    msg: &Value,
    method: &str,
) -> Option<(i64, &'static str)> {
    let meta = &msg["params"]["_meta"];
    let version = meta["io.modelcontextprotocol/protocolVersion"].as_str();
    if method == "initialize" || version.is_none() && req.header("mcp-protocol-version").is_none() {
        return Some((-32022, "this server speaks only 2026-07-28"));
    }
    if version.is_none() || !meta["io.modelcontextprotocol/clientCapabilities"].is_object() {
        return Some((-32602, "params._meta is required"));
    }
    if req.header("mcp-protocol-version") != version || req.header("mcp-method") != Some(method) {
        return Some((-32020, "headers do not match the body"));
    }
    if method == "tools/call" && req.header("mcp-name") != msg["params"]["name"].as_str() {
        return Some((-32020, "Mcp-Name does not match params.name"));
    }
    (version != Some("2026-07-28")).then_some((-32022, "unsupported protocol version"))
}

/// [`ToolMode::InputRequired`](crate::ToolMode::InputRequired) answers `id`: a call without the inputs
/// asks for a name (`elicitation/create`) and a line (`sampling/createMessage`), with
/// `requestState` `"round-1"`; its retry with both answers and that state completes, the
/// result's text the JSON of the `inputResponses` it got.
pub fn input_round(id: &Value, params: &Value) -> Value {
    let given = &params["inputResponses"];
    if params["requestState"] == "round-1" && given["name"].is_object() && given["line"].is_object()
    {
        let text = given.to_string();
        let done = json!({"resultType": "complete", "content": [{"type": "text", "text": text}]});
        return json!({"jsonrpc": "2.0", "id": id, "result": done});
    }
    let ask = json!({"resultType": "input_required", "requestState": "round-1", "inputRequests": {
        "name": {"method": "elicitation/create", "params": {"message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}},
        "line": {"method": "sampling/createMessage", "params": {"maxTokens": 10,
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}]}}}});
    json!({"jsonrpc": "2.0", "id": id, "result": ask})
}

/// Whether a request to a server of both eras ([`FakeToolServer::both`](crate::FakeToolServer::both))
/// is of the 2026-07-28 one: its `_meta` or its header says so.
pub(crate) fn in_2026_envelope(req: &crate::openai::Recorded, msg: &Value) -> bool {
    msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].is_string()
        || req.header("mcp-protocol-version") == Some("2026-07-28")
}

/// What the fake declares: the tools, and for the both-era one its resources and logging.
pub(crate) fn capabilities(both: bool) -> Value {
    match both {
        true => json!({"tools": {}, "resources": {"subscribe": true}, "logging": {}}),
        false => json!({"tools": {}}),
    }
}

/// The answer to `server/discover`: 2026-07-28 alone, also when the server speaks 2025 too
/// (as the 2.x SDK's servers answer: the versions of the stateless era).
pub(crate) fn discovered(both: bool) -> Value {
    json!({"supportedVersions": ["2026-07-28"], "capabilities": capabilities(both), "ttlMs": 60000,
        "cacheScope": "public", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake-2026", "version": "1"}}})
}
