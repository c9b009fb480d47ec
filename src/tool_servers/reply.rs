//! What a tool server answers, read once: a JSON-RPC response kept as the server wrote it, and
//! which notifications on its event stream are the agent's to see, and what is relayed to the
//! agent from it (`asks.rs`).

use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tollgate_filters::json::raw::{self, ObjectError};

/// A JSON-RPC response from a tool server, read once: its `result` kept as the server wrote it
/// (a tool's result can be large, and is passed on as sent rather than built into a tree and
/// written again), the rest decoded (small).
pub struct Reply {
    result: Option<Box<RawValue>>,
    /// `null` included: an error member that is there is no result.
    error: Option<Value>,
    pub(super) id: Option<Value>,
    /// `jsonrpc` is `"2.0"`.
    pub(super) versioned: bool,
}

impl Reply {
    /// `Err(())`: not JSON at all; `Ok(None)`: JSON, but no response (no `result` and no
    /// `error`).
    pub(super) fn read(bytes: &[u8]) -> Result<Option<Reply>, ()> {
        let members = match raw::parse_object(bytes) {
            Err(ObjectError::Malformed(_)) => return Err(()),
            Err(ObjectError::NotAnObject) => return Ok(None),
            Ok(m) => m,
        };
        let tree = |name: &str| {
            raw::get(&members, name).map(|v| serde_json::from_str(v.get()).unwrap_or_default())
        };
        let reply = Reply {
            result: raw::get(&members, "result").map(ToOwned::to_owned),
            error: tree("error"),
            id: raw::get(&members, "id").and_then(|v| serde_json::from_str(v.get()).ok()),
            versioned: raw::get(&members, "jsonrpc")
                .and_then(raw::as_str)
                .as_deref()
                == Some("2.0"),
        };
        Ok((reply.result.is_some() || reply.error.is_some()).then_some(reply))
    }

    /// The `result` as sent.
    pub fn result(&self) -> Option<&RawValue> {
        self.result.as_deref()
    }

    pub fn into_result(self) -> Option<Box<RawValue>> {
        self.result
    }

    pub fn error(&self) -> Option<&Value> {
        self.error.as_ref()
    }

    /// The result as a tree, for the callers that read into it (initialize, the live check);
    /// `null` without one.
    pub fn result_tree(&self) -> Value {
        self.result()
            .and_then(|r| serde_json::from_str(r.get()).ok())
            .unwrap_or_default()
    }
}

/// Whether an event of a tool server's stream is a notification the agent is relayed.
pub(super) fn relayed(data: &str) -> bool {
    let Ok(members) = raw::parse_object(data.as_bytes()) else {
        return false;
    };
    raw::get(&members, "id").is_none()
        && raw::get(&members, "method")
            .and_then(raw::as_str)
            .is_some_and(|m| m == "notifications/progress" || m == "notifications/message")
}

/// Where a call's relayed messages go (every notification, and the server's requests when
/// `asks`).
pub struct RelayTo {
    pub tx: UnboundedSender<Relayed>,
    /// The agent's answer can carry the server's requests.
    pub asks: bool,
}

/// One message for the agent.
pub enum Relayed {
    /// A notification, as the server wrote it.
    Note(Vec<u8>),
    /// A request of the server's, with what its answer needs to find its way back.
    Ask(Ask),
}

pub struct Ask {
    /// The request as the server wrote it.
    pub message: Vec<u8>,
    /// The server's own id for it.
    pub id: Value,
    pub method: String,
    /// The gateway's session with the server the request came in.
    pub session: Option<String>,
    pub version: String,
}
