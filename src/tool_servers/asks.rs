//! What a tool server sends on a request's event stream besides the response: progress and
//! log notifications, relayed to the agent that asked for them, and the server's own requests
//! to the client (`sampling/createMessage`, `elicitation/create`, `roots/list`, `ping`),
//! relayed to the agent when its answer can carry them (an event stream, a 2025-era client)
//! and otherwise answered here at once, so that the call does not wait for an answer that
//! cannot come: `ping` with an empty result, anything else with a JSON-RPC error. The agent's
//! answer to a relayed request comes back as a POST, maybe to another instance, and is handed
//! to the server's session with [`Upstream::deliver`].

use std::time::Duration;

use serde_json::json;
use tollgate_filters::mcp::{ask, METHOD_NOT_FOUND};

use super::cache::UpstreamSession;
use super::client::{fail, Failure, Upstream};
use super::reply::{relayed, Ask, Relayed, Reply};
use crate::upstream::wire;

impl Upstream<'_> {
    /// One event of a server's stream during a request: a response is returned; a
    /// notification or a request of the server's is relayed or answered (`session`: the one the
    /// request went in).
    pub(super) async fn on_event(
        &self,
        data: String,
        session: Option<&UpstreamSession>,
    ) -> Option<Reply> {
        if relayed(&data) {
            if let Some(r) = self.relay.as_ref() {
                let _ = r.tx.send(Relayed::Note(data.into_bytes()));
            }
            return None;
        }
        let Some((id, method)) = ask::server_request(data.as_bytes()) else {
            return Reply::read(data.as_bytes()).ok().flatten();
        };
        let session_id = session.and_then(|s| s.id.clone());
        let version = session.map(|s| s.version.clone()).unwrap_or_default();
        if let Some(r) = self.relay.as_ref().filter(|r| r.asks) {
            let ask = Ask {
                message: data.into_bytes(),
                id: id.clone(),
                method: method.clone(),
                session: session_id.clone(),
                version: version.clone(),
            };
            // A closed channel: the call is being given up; the server is answered below.
            if r.tx.send(Relayed::Ask(ask)).is_ok() {
                return None;
            }
        }
        // Nobody to ask: the server gets its answer now rather than waiting out the call.
        let answer = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": METHOD_NOT_FOUND,
                "message": format!("the agent cannot be asked `{method}` during this call (Tollgate relays a tool server's requests only to a 2025-era client whose call accepts text/event-stream)")}})
        };
        let body = answer.to_string();
        if let Err(f) = self
            .deliver(body.as_bytes(), session_id.as_deref(), &version)
            .await
        {
            tracing::debug!(url = %self.key, "answering a tool server's request failed: {f}");
        }
        None
    }

    /// POSTs a response to one of the server's requests into its session (`session_id`, of
    /// protocol `version`): the HTTP status the server answered.
    pub async fn deliver(
        &self,
        message: &[u8],
        session_id: Option<&str>,
        version: &str,
    ) -> Result<u16, Failure> {
        let session = UpstreamSession {
            id: session_id.map(str::to_owned),
            version: version.to_owned(),
            ..UpstreamSession::default()
        };
        let peer = self.peer();
        let request = self.build(message, Some(&session), None)?;
        let connector = &self.shared.connector;
        let exchange = async {
            let mut up = wire::exchange(connector, &peer, &request)
                .await
                .map_err(|_| fail("could not be reached"))?;
            let status = up.status();
            // A response's answer is a 202 with no body; whatever there is is read and
            // dropped, a bounded amount, so that the connection can be reused.
            let mut read = 0usize;
            loop {
                match up.read_body().await {
                    Ok(Some(b)) if read + b.len() < 65_536 => read += b.len(),
                    Ok(None) => {
                        up.release(connector, &peer, Some(Duration::from_secs(30)));
                        break;
                    }
                    _ => break,
                }
            }
            Ok(status)
        };
        match tokio::time::timeout(self.left(), exchange).await {
            Ok(r) => r,
            Err(_) => Err(fail("did not take the answer in time")),
        }
    }
}
