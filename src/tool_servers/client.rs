//! The gateway as an MCP client of a tool server (Streamable HTTP): one JSON-RPC message per
//! POST, the reply as JSON or as an SSE stream (read up to the response with the request's id),
//! `Mcp-Session-Id` and `MCP-Protocol-Version` kept per upstream URL and re-initialised when the
//! server answers 404. Plain JSON-RPC handlers with no `initialize` are called without a session.
//! A server that answers `server/discover` with 2026-07-28 is spoken to statelessly instead
//! (`stateless.rs`): the era's `_meta` in every request's params, its routing headers.
//!
//! Every connection goes to the address the host resolved to and was checked against (the SSRF
//! guard), so a DNS answer cannot change between the check and the connect. Replies are read
//! into a bounded buffer: past `[mcp] max_result_bytes` the read stops.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use pingora::upstreams::peer::HttpPeer;
use serde_json::{json, Value};
use tollgate_filters::json::raw;
use tollgate_filters::mcp::{era, private_reason, request_json, PROTOCOL_VERSIONS};
use tollgate_filters::sse::SseDecoder;
use tollgate_filters::trace::TRACEPARENT_LEN;

use super::cache::UpstreamSession;
use super::reply::{RelayTo, Reply};
use crate::config::EndpointUrl;
use crate::runtime::Shared;
use crate::upstream::head::Request;
use crate::upstream::wire;

/// The id of the next request to a tool server (`initialize` and `server/discover` use 0).
static NEXT_ID: AtomicI64 = AtomicI64::new(1);

/// Why a tool server could not be used, in words a client may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn fail(what: impl Into<String>) -> Failure {
    Failure(what.into())
}

/// One tool server, as the gateway reaches it.
pub struct Upstream<'a> {
    pub(super) shared: &'a Shared,
    url: EndpointUrl,
    /// The upstream URL as registered: the key of its session.
    pub(super) key: String,
    addr: SocketAddr,
    deadline: Instant,
    max_bytes: usize,
    /// Where the notifications and requests a server sends during a request go, to be relayed
    /// to the agent (`asks.rs`); `None`: notifications dropped, requests answered here.
    pub(super) relay: Option<RelayTo>,
    /// The agent is of the 2025 era: a server of both eras is spoken to in 2025 for it.
    pub(super) legacy: bool,
    /// The `traceparent` and `tracestate` of the call's trace (`telemetry::context`).
    trace: Option<([u8; TRACEPARENT_LEN], Option<String>)>,
}

/// What one POST answered.
pub(super) struct Answer {
    pub(super) status: u16,
    session: Option<String>,
    /// The JSON-RPC response to the request (absent for a notification's 202).
    pub(super) message: Option<Reply>,
}

/// A 2026-07-28 request's routing headers (`Mcp-Method`, and `Mcp-Name` when it names a tool,
/// prompt or resource); its JSON-RPC errors come with 4xx statuses and are read too.
pub(super) struct Routing<'m> {
    pub(super) method: &'m str,
    pub(super) name: Option<String>,
}

impl<'a> Upstream<'a> {
    /// Resolves the URL's host and applies the SSRF guard to the address it will connect to.
    pub async fn resolve(
        shared: &'a Shared,
        url: &str,
        timeout: Duration,
    ) -> Result<Upstream<'a>, Failure> {
        let parsed = EndpointUrl::parse(url).map_err(|e| fail(format!("upstream_url {e}")))?;
        let rt = shared.runtime.load();
        let mcp = &rt.config.mcp;
        let deadline = Instant::now() + timeout;
        let host_port = [parsed.host.as_str(), ":", &parsed.port.to_string()].concat();
        let addr = match shared.mcp.resolved(&host_port) {
            Some(a) => a,
            None => {
                let lookup = tokio::net::lookup_host((parsed.host.clone(), parsed.port));
                let mut addrs = match tokio::time::timeout(timeout, lookup).await {
                    Ok(Ok(a)) => a,
                    Ok(Err(e)) => return Err(fail(format!("its host does not resolve ({e})"))),
                    Err(_) => return Err(fail("its host did not resolve in time")),
                };
                let a = addrs
                    .next()
                    .ok_or_else(|| fail("its host has no address"))?;
                shared.mcp.set_resolved(&host_port, a);
                a
            }
        };
        // Checked on every call, cached or not: the rule may have been reloaded since.
        if !mcp.allow_private_upstreams {
            if let Some(why) = private_reason(addr.ip()) {
                return Err(fail(format!(
                    "its host resolves to {why} ({}), which tool servers may not use",
                    addr.ip()
                )));
            }
        }
        Ok(Upstream {
            shared,
            key: url.to_owned(),
            url: parsed,
            addr,
            deadline,
            max_bytes: mcp.max_result_bytes,
            relay: None,
            legacy: false,
            trace: None,
        })
    }

    /// Relays the server's notifications and requests during requests (`asks.rs`).
    pub fn relaying(mut self, relay: RelayTo) -> Self {
        self.relay = Some(relay);
        self
    }

    /// Speaks for an agent of the 2025 era (`legacy`) or of 2026-07-28 (`stateless.rs`).
    pub fn for_agent(mut self, legacy: bool) -> Self {
        self.legacy = legacy;
        self
    }

    /// Sends `traceparent` (and the client's `tracestate`) with every request: the call's
    /// span as their parent.
    pub fn traced(
        mut self,
        traceparent: Option<[u8; TRACEPARENT_LEN]>,
        state: Option<&str>,
    ) -> Self {
        self.trace = traceparent.map(|tp| (tp, state.map(str::to_owned)));
        self
    }

    /// The time the request has left.
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Sends one JSON-RPC request (in the era the server speaks, the agent's when it speaks
    /// both: found out first when not known, [`Upstream::session`]), its `params` the given
    /// JSON text, and returns its response object (`result` or `error`).
    pub async fn request(&self, method: &str, params: Option<&[u8]>) -> Result<Reply, Failure> {
        let (mut key, mut session) = self.session().await?;
        for attempt in 0..2 {
            // An id of its own: the gateway's session with a server carries many agents'
            // requests at once, and the server tells their responses apart by it.
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            let stateless = session.version == era::STATELESS;
            let (msg, routing) = if stateless {
                let p = era::with_meta(params, env!("CARGO_PKG_VERSION"))
                    .ok_or_else(|| fail("was to be sent params that are not an object"))?;
                let routing = Routing {
                    method,
                    name: routing_name(method, &p),
                };
                (request_json(Some(id), method, Some(&p)), Some(routing))
            } else {
                (request_json(Some(id), method, params), None)
            };
            let a = self
                .post(&msg, Some(id), Some(&session), routing.as_ref())
                .await?;
            match (a.status, a.message) {
                (404, _) if attempt == 0 && session.id.is_some() => {
                    // The server forgot our session (restart, expiry): start another once.
                    self.shared.mcp.drop_session(&key);
                    session = Box::pin(self.initialize(&key)).await?;
                }
                // A stateless server that no longer speaks the era (or never answers this
                // path): find out again, once.
                (400 | 404, m)
                    if attempt == 0
                        && stateless
                        && m.as_ref().is_none_or(|m| {
                            m.error()
                                .is_some_and(|e| e["code"] == era::UNSUPPORTED_VERSION)
                        }) =>
                {
                    self.shared.mcp.drop_session(&self.key);
                    (key, session) = Box::pin(self.session()).await?;
                }
                (200..=299, Some(m)) => return Ok(m),
                (400..=499, Some(m)) if stateless && m.error().is_some() => return Ok(m),
                (200..=299, None) => return Err(fail("answered without a JSON-RPC response")),
                (s, _) => return Err(fail(format!("answered HTTP {s}"))),
            }
        }
        Err(fail("kept refusing its session"))
    }

    /// `initialize` and `notifications/initialized`, the session kept under `key`; a server
    /// that refuses `initialize` is a plain handler and is called without a session.
    pub async fn initialize(&self, key: &str) -> Result<UpstreamSession, Failure> {
        let session = self.handshake().await?.unwrap_or_else(|| UpstreamSession {
            version: PROTOCOL_VERSIONS[0].to_owned(),
            ..UpstreamSession::default()
        });
        self.shared.mcp.set_session(key, session.clone());
        Ok(session)
    }

    /// `initialize` and `notifications/initialized`: the session, or `None` when the server
    /// refuses `initialize` (a JSON-RPC error, or HTTP 400, 404 or 405 as some plain handlers
    /// and 2026-only servers answer).
    pub(super) async fn handshake(&self) -> Result<Option<UpstreamSession>, Failure> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSIONS[0],
            // What the gateway relays to the agent during a call (`asks.rs`); an agent that
            // cannot be asked has the server's request answered with an error.
            "capabilities": {"sampling": {}, "elicitation": {}},
            "clientInfo": {"name": "tollgate", "version": env!("CARGO_PKG_VERSION")}});
        let msg = request_json(Some(0), "initialize", Some(params.to_string().as_bytes()));
        let a = self.post(&msg, Some(0), None, None).await?;
        let session = match (a.status, &a.message) {
            (200..=299, Some(m)) if m.result().is_some() => {
                let result = m.result_tree();
                UpstreamSession {
                    id: a.session,
                    version: result["protocolVersion"]
                        .as_str()
                        .unwrap_or(PROTOCOL_VERSIONS[0])
                        .to_owned(),
                    also_2025: None,
                    capabilities: result["capabilities"].clone(),
                }
            }
            (200..=299, Some(m)) if m.error().is_some() => return Ok(None),
            (400 | 404 | 405, _) => return Ok(None),
            (s, _) => return Err(fail(format!("answered initialize with HTTP {s}"))),
        };
        if session.id.is_some() || a.status == 200 {
            let note = request_json(None, "notifications/initialized", None);
            self.post(&note, None, Some(&session), None).await?;
        }
        Ok(Some(session))
    }

    /// POSTs one message (`id`: the request's, `None` for a notification).
    pub(super) async fn post(
        &self,
        msg: &[u8],
        id: Option<i64>,
        session: Option<&UpstreamSession>,
        routing: Option<&Routing<'_>>,
    ) -> Result<Answer, Failure> {
        let left = self.left();
        match tokio::time::timeout(left, self.exchange(msg, id, session, routing)).await {
            Ok(r) => r,
            Err(_) => Err(fail("did not answer in time")),
        }
    }

    /// The server's address, to connect to within the time left.
    pub(super) fn peer(&self) -> HttpPeer {
        let sni = if self.url.tls {
            self.url.host.clone()
        } else {
            String::new()
        };
        let mut peer = HttpPeer::new(self.addr, self.url.tls, sni);
        peer.options.connection_timeout = Some(self.left());
        peer.options.read_timeout = Some(self.left());
        peer
    }

    /// One POST of `body` to the server, in `session` and with `routing` when given.
    pub(super) fn build(
        &self,
        body: &[u8],
        session: Option<&UpstreamSession>,
        routing: Option<&Routing<'_>>,
    ) -> Result<Vec<u8>, Failure> {
        let path = if self.url.base_path.is_empty() {
            "/"
        } else {
            self.url.base_path.as_str()
        };
        (|| -> pingora::Result<Vec<u8>> {
            let mut r = Request::new("POST", path)?
                .header("Host", &self.url.authority())?
                .header("Content-Type", "application/json")?
                .header("Accept", "application/json, text/event-stream")?;
            if let Some(s) = session {
                r = r.header("MCP-Protocol-Version", &s.version)?;
                if let Some(id) = &s.id {
                    r = r.header("Mcp-Session-Id", id)?;
                }
            }
            if let Some((tp, state)) = &self.trace {
                // Hex digits and dashes: always ASCII.
                r = r.header("traceparent", std::str::from_utf8(tp).unwrap_or_default())?;
                if let Some(s) = state {
                    r = r.header("tracestate", s)?;
                }
            }
            if let Some(route) = routing {
                r = r.header("Mcp-Method", &era::header_value(route.method))?;
                if let Some(name) = &route.name {
                    r = r.header("Mcp-Name", &era::header_value(name))?;
                }
            }
            Ok(r.body(body))
        })()
        .map_err(|e| fail(format!("could not be asked ({e})")))
    }

    async fn exchange(
        &self,
        body: &[u8],
        id: Option<i64>,
        session: Option<&UpstreamSession>,
        routing: Option<&Routing<'_>>,
    ) -> Result<Answer, Failure> {
        let mut peer = self.peer();
        // `post`'s deadline bounds the whole exchange: a timer per read as well would be
        // another timer registered (and the runtime's driver woken) on every call.
        peer.options.read_timeout = None;
        let request = self.build(body, session, routing)?;
        let connector = &self.shared.connector;
        let mut up = wire::exchange(connector, &peer, &request)
            .await
            .map_err(|e| match e {
                wire::Failure::Connect(_) => fail("could not be connected to"),
                wire::Failure::Exchange(_) => fail("dropped the connection"),
            })?;
        let status = up.status();
        let session_id = up.header("mcp-session-id").map(str::to_owned);
        let sse = up
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let want_id = id.map(Value::from);
        let mut buf = BytesMut::new();
        let mut decoder = SseDecoder::new(self.max_bytes);
        let mut events = Vec::new();
        let mut found = None;
        loop {
            match up.read_body().await {
                Ok(Some(b)) => {
                    if buf.len() + b.len() >= self.max_bytes {
                        return Err(fail(format!(
                            "sent a reply of {} bytes or more (the limit)",
                            self.max_bytes
                        )));
                    }
                    if sse {
                        decoder
                            .push(&b, &mut events)
                            .map_err(|e| fail(format!("sent an invalid event stream ({e})")))?;
                        // The response to our id ends what we need of the stream; notifications
                        // and the server's requests on the way are relayed or answered.
                        for e in std::mem::take(&mut events) {
                            let reply = Box::pin(self.on_event(e.data, session)).await;
                            if let Some(r) = reply.filter(|r| r.id == want_id) {
                                found = Some(r);
                                break;
                            }
                        }
                        if found.is_some() {
                            break;
                        }
                    }
                    buf.extend_from_slice(&b);
                }
                Ok(None) => break,
                Err(_) => return Err(fail("dropped the connection mid-reply")),
            }
        }
        let message = if sse {
            found
        } else if buf.is_empty() || !((200..300).contains(&status) || routing.is_some()) {
            None
        } else {
            match Reply::read(&buf) {
                Err(()) => return Err(fail("sent a reply that is not JSON")),
                Ok(Some(r)) if r.versioned => Some(r),
                Ok(_) => return Err(fail("sent a reply that is not a JSON-RPC response")),
            }
        };
        if !sse && message.is_some() {
            up.release(connector, &peer, Some(Duration::from_secs(30)));
        }
        Ok(Answer {
            status,
            session: session_id,
            message,
        })
    }
}

/// What `Mcp-Name` carries for `method`: the tool's or prompt's name, or the resource's URI.
fn routing_name(method: &str, params: &[u8]) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    let members = raw::parse_object(params).ok()?;
    raw::get(&members, key)
        .and_then(raw::as_str)
        .map(|s| s.into_owned())
}
