//! JSON-RPC 2.0 messages as the agent endpoint reads and writes them. A message is read in
//! place: its members located in the body, `params` kept as the agent's bytes (a tool's
//! arguments are passed on, never built into a tree and written again), and the request to a
//! tool server written around those bytes.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::error::{ErrorKind, GatewayError};

use crate::json::raw::{self, Kind, MemberList, ObjectError};
use crate::json::splice::splice_members;

/// JSON-RPC's error codes, and ours (-32000 to -32099 are the server's to define).
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// The caller's plan rate limit refused the call (`data.retry_after`).
pub const RATE_LIMITED: i64 = -32001;
/// The caller's balance cannot pay the call's price.
pub const INSUFFICIENT_CREDITS: i64 = -32002;
/// The tool server failed (refused, timed out, answered with an error or garbage).
pub const UPSTREAM_ERROR: i64 = -32003;

/// One JSON-RPC message from an agent, borrowed from its body.
#[derive(Debug, Clone)]
pub enum Incoming<'a> {
    Request {
        id: Value,
        method: Cow<'a, str>,
        /// An object or an array, as sent; `None` when absent or `null`.
        params: Option<&'a RawValue>,
    },
    /// No `id`: answered 202 with no body.
    Notification { method: Cow<'a, str> },
    /// A response to a request a tool server sent the agent during a call (relayed with an id
    /// of the gateway's making, `ask`): delivered to that server.
    Response { id: Value },
}

/// A JSON-RPC error to answer, with the id it answers (null when none could be read).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub id: Value,
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(id: Value, code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            id,
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The gateway's error as a JSON-RPC error: the code for its kind, its message, and
    /// `data` with the HTTP status and `error.type` the same failure has on the HTTP API
    /// (`retry_after` too for a rate limit), so an agent reads the same facts either way.
    pub fn from_error(id: Value, e: &GatewayError) -> RpcError {
        // Exhaustive: a kind added to the gateway's errors needs its JSON-RPC code here.
        let code = match e.kind {
            ErrorKind::InvalidRequest | ErrorKind::ModelNotFound | ErrorKind::NotFound => {
                INVALID_PARAMS
            }
            ErrorKind::RateLimited { .. } => RATE_LIMITED,
            ErrorKind::InsufficientCredits => INSUFFICIENT_CREDITS,
            ErrorKind::Upstream | ErrorKind::Overloaded | ErrorKind::ToolServerCheckFailed => {
                UPSTREAM_ERROR
            }
            ErrorKind::MethodNotAllowed => METHOD_NOT_FOUND,
            ErrorKind::Authentication
            | ErrorKind::Forbidden
            | ErrorKind::Conflict
            | ErrorKind::Internal
            | ErrorKind::ServiceUnavailable => INTERNAL_ERROR,
        };
        let (status, ty) = e.status_and_type();
        let mut data = json!({"type": ty, "code": status});
        if let Some(r) = e.retry_after() {
            data["retry_after"] = r.into();
        }
        RpcError::new(id, code, e.message.clone()).with_data(data)
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            error["data"] = d.clone();
        }
        // Serializing a Value cannot fail.
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": self.id, "error": error}))
            .unwrap_or_default()
    }
}

/// A JSON-RPC result around a result's JSON text, which is copied as it is (a tool's result
/// can be large, and is the tool server's to shape: it is passed on, not rebuilt).
pub fn result_json(id: &Value, result: &RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(result.get().len() + 48);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result.get().as_bytes());
    out.push(b'}');
    out
}

/// A JSON-RPC request (`id`) or notification (no `id`) with `params` as given JSON text
/// (left out when `None`: JSON-RPC allows no `null` params).
pub fn request_json(id: Option<i64>, method: &str, params: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + params.map_or(0, <[u8]>::len));
    out.extend_from_slice(br#"{"jsonrpc":"2.0","#);
    if let Some(id) = id {
        out.extend_from_slice(format!(r#""id":{id},"#).as_bytes());
    }
    out.extend_from_slice(br#""method":"#);
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, method);
    if let Some(p) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(p);
    }
    out.push(b'}');
    out
}

/// A `tools/call`'s params as the tool server gets them: the agent's bytes with `name` set to
/// the tool's own name (`/mcp` offers it as `{slug}__{tool}`). `members` are `params`' own.
pub fn tool_call_params(params: &RawValue, members: &MemberList<'_>, tool: &str) -> Vec<u8> {
    let name = Value::from(tool).to_string();
    let mut out = Vec::with_capacity(params.get().len() + 16);
    splice_members(
        params.get().as_bytes(),
        members,
        &[("name", name.as_bytes())],
        &mut out,
    );
    out
}

/// Reads one message. A batch (an array) is refused: the 2025-06-18 revision removed batching,
/// and answering element by element would bill a batch's calls outside one request's limits.
pub fn parse_message(body: &[u8]) -> Result<Incoming<'_>, RpcError> {
    let m = match raw::parse_object(body) {
        Ok(m) => m,
        Err(ObjectError::Malformed(e)) => {
            return Err(RpcError::new(
                Value::Null,
                PARSE_ERROR,
                format!("not JSON: {e}"),
            ))
        }
        Err(ObjectError::NotAnObject) => {
            let array = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
            let what = if array {
                "batches are not supported: send one JSON-RPC message per request"
            } else {
                "a JSON-RPC message must be an object"
            };
            return Err(RpcError::new(Value::Null, INVALID_REQUEST, what));
        }
    };
    // An id is a string or an integer (checked below): small, so decoded.
    let id: Option<Value> =
        raw::get(&m, "id").map(|v| serde_json::from_str(v.get()).unwrap_or_default());
    let bad = |what: &str| RpcError::new(id.clone().unwrap_or(Value::Null), INVALID_REQUEST, what);
    if raw::get(&m, "jsonrpc").and_then(raw::as_str).as_deref() != Some("2.0") {
        return Err(bad("jsonrpc must be \"2.0\""));
    }
    if let Some(id) = &id {
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return Err(RpcError::new(
                Value::Null,
                INVALID_REQUEST,
                "id must be a string or an integer",
            ));
        }
    }
    let Some(method) = raw::get(&m, "method") else {
        let answer = raw::get(&m, "result").is_some() || raw::get(&m, "error").is_some();
        if let (Some(id), true) = (&id, answer) {
            return Ok(Incoming::Response { id: id.clone() });
        }
        return Err(bad("method is required"));
    };
    let Some(method) = raw::as_str(method) else {
        return Err(bad("method must be a string"));
    };
    let params = raw::get_set(&m, "params");
    if params.is_some_and(|p| !matches!(raw::kind(p), Kind::Object | Kind::Array)) {
        return Err(bad("params must be an object"));
    }
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method },
    })
}
