//! The agent endpoint, MCP Streamable HTTP: `POST /mcp` offers the tools of every live service
//! as `{slug}__{tool}`; `POST /mcp/{slug}` offers one service's tools under their own names and
//! passes its other methods through, unbilled. Stateless: no session id is issued, so any
//! instance answers any request (nothing is pinned to the replica that saw `initialize`).
//! Replies are single JSON objects (`application/json`), which the transport allows for every
//! request, or an event stream for a call that relays a tool server's messages; notifications
//! get 202, and responses (answers to a server's requests) are delivered ([`asks`](super::asks)). Both protocol eras: 2025 clients open with
//! `initialize`; 2026-07-28 clients are stateless and answered in their era's shape
//! ([`stateless`](super::stateless)).

use std::time::Instant;

use crate::request::Session;
use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{json, Value};
use tollgate_filters::json::raw::{self, Kind};
use tollgate_filters::mcp::{
    call_succeeded, era, joined_name, negotiate, parse_message, result_json, service_allowed,
    tool_allowed, tool_call_params, Incoming, RpcError, METHOD_NOT_FOUND,
};
use tollgate_filters::{ErrorKind, GatewayError};

use super::forward::{forward, passthrough};
use super::stateless::{self, declared};
use super::{asks, inputs, relay};
use crate::auth::caller::{self, Caller};
use crate::ledger::mcp::Service;
use crate::ledger::KeyAuth;
use crate::limits::budgets::Caps;
use crate::metering::charge::Charge;
use crate::metering::tool::{self, ToolCall};
use crate::metering::Hold;
use crate::request::ctx::{Door, RequestCtx, Wire};
use crate::request::{body, respond};
use crate::runtime::Shared;
use crate::telemetry::context::ToolCall as TracedCall;
use crate::tool_servers::client::{Failure, Upstream};
use crate::tool_servers::live;
use crate::tool_servers::reply::Reply;

/// The MCP endpoints (`/mcp`, `/mcp/{slug}`): metered per `tools/call`.
pub const MCP: Door = Door {
    name: "mcp",
    wire: Wire::OpenAi,
    what: "tool call",
};

/// The member of a listed tool's `_meta` that says what one call costs, in whole credits.
pub const PRICE_META: &str = "tollgate/price_credits";

/// `POST /mcp` (`slug` None) and `POST /mcp/{slug}`. Rare methods' futures are boxed: a future
/// is copied whole at each call level, and unboxed they made every `tools/call`'s larger.
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    slug: Option<&str>,
) -> Result<(), GatewayError> {
    // The route table admits only keys here (`Access::Mcp`).
    let Caller::Key(key) = caller else {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "the MCP endpoint needs an API key: send Authorization: Bearer <API key>",
        ));
    };
    let rt = shared.runtime.load_full();
    let raw = body::read_within(session, &rt.config).await?;
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    let (id, method, params) = match parse_message(&raw) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Response { id }) => {
            // The agent's answer to a tool server's request relayed during a call.
            let allowed = key.allowed_tools.as_deref();
            Box::pin(asks::answer(
                shared,
                session,
                ctx,
                &key.account_id,
                allowed,
                slug,
                &raw,
                id,
            ))
            .await;
            return Ok(());
        }
        Ok(Incoming::Notification { .. }) => {
            respond::send(session, ctx, 202, "application/json", Vec::new(), &[]).await;
            return Ok(());
        }
        Err(e) => {
            respond::send(session, ctx, 400, "application/json", e.to_json(), &[]).await;
            return Ok(());
        }
    };
    // A 2026-07-28 request is checked first; its answer takes that era's shape.
    let headers = stateless::headers(session);
    let is_2026 = era::is_stateless(&method, params, &headers);
    if is_2026 {
        if let Err(mut e) = era::check(&method, params, &headers) {
            e.id = id;
            let status = era::http_status(e.code);
            respond::send(session, ctx, status, "application/json", e.to_json(), &[]).await;
            return Ok(());
        }
    }
    let request = Request {
        id,
        method: &method,
        params,
        is_2026,
    };
    request
        .answer(shared, session, ctx, (caller, key), slug)
        .await
}

/// One JSON-RPC request to the endpoint, checked for its era.
struct Request<'a> {
    id: Value,
    method: &'a str,
    params: Option<&'a RawValue>,
    is_2026: bool,
}

impl Request<'_> {
    /// Answers the request for the services in its scope (`/mcp/{slug}`: that one), in its
    /// era's shape; a call whose server's notifications were relayed ends its open stream.
    async fn answer(
        self,
        shared: &Shared,
        session: &mut Session,
        ctx: &mut RequestCtx,
        (caller, key): (&Caller, &KeyAuth),
        slug: Option<&str>,
    ) -> Result<(), GatewayError> {
        let services = live::services(shared).await?;
        let allowed = key.allowed_tools.as_deref();
        let scope = scope(&services, allowed, slug)?;
        let ttl_ms = shared.runtime.load().config.mcp.refresh.as_millis() as u64;
        // `/mcp/{slug}`'s own service, whose other methods are passed through to it.
        let own = scope.first().copied().filter(|_| slug.is_some());
        let (id, params, is_2026) = (&self.id, self.params, self.is_2026);
        // A call whose notifications were relayed has its answer's stream open already.
        let mut streamed = false;
        let answer = match self.method {
            "server/discover" => stateless::discover(ttl_ms, declared(shared, own, false).await),
            "initialize" => Ok(raw_json(&json!({
                "protocolVersion": negotiate(protocol_version(params).as_deref()),
                "capabilities": declared(shared, own, true).await,
                "serverInfo": {"name": "tollgate", "version": env!("CARGO_PKG_VERSION")},
            }))),
            "ping" => Ok(raw_json(&json!({}))),
            "subscriptions/listen" => Err(stateless::no_listen()),
            "tools/list" => Ok(raw_json(
                &json!({"tools": list(&scope, slug.is_some(), allowed)}),
            )),
            "tools/call" => {
                let mut call = Call {
                    shared,
                    id,
                    params,
                    account: &key.account_id,
                    key: &key.key_id,
                    allowed,
                    caps: Caps::of(key),
                    is_2026,
                    opened: false,
                };
                let out = call.run(session, ctx, caller, &scope, slug.is_some()).await;
                streamed = call.opened;
                out
            }
            other => match own {
                // One service's own methods (resources, prompts, completion, logging) as it
                // answers them.
                Some(s) => Box::pin(forward(shared, s, other, params, !is_2026)).await,
                None => Err(RpcError::new(
                    id.clone(),
                    METHOD_NOT_FOUND,
                    format!("method `{other}` is not offered at /mcp"),
                )),
            },
        };
        let (status, answer) = match is_2026 {
            true => stateless::shape(self.method, answer, ttl_ms),
            false => (200, answer),
        };
        let bytes = match answer {
            Ok(result) => result_json(id, &result),
            Err(mut e) => {
                e.id = id.clone();
                e.to_json()
            }
        };
        crate::request_log::capture::reply(ctx, &bytes);
        if streamed {
            relay::finish(session, &bytes).await;
        } else {
            respond::send(session, ctx, status, "application/json", bytes, &[]).await;
        }
        Ok(())
    }
}

/// The live services a request may see: a key limited to some tools sees only the services
/// it may use something of (another does not exist for it); `/mcp/{slug}` sees that one, or
/// is a 404.
fn scope<'s>(
    services: &'s [Service],
    allowed: Option<&[String]>,
    slug: Option<&str>,
) -> Result<Vec<&'s Service>, GatewayError> {
    let services = services
        .iter()
        .filter(|x| service_allowed(allowed, &x.slug));
    let Some(s) = slug else {
        return Ok(services.collect());
    };
    let found: Vec<&Service> = services.filter(|x| x.slug == s).collect();
    if found.is_empty() {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no live tool server `{s}`"),
        ));
    }
    Ok(found)
}

/// The `protocolVersion` an `initialize` asks for.
fn protocol_version(params: Option<&RawValue>) -> Option<Cow<'_, str>> {
    let members = raw::object(params?)?;
    raw::as_str(raw::get(&members, "protocolVersion")?)
}

/// A result built here, as JSON text.
fn raw_json(v: &Value) -> Box<RawValue> {
    // A Value always serializes; `null` is the unreachable fallback.
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| null())
}

fn null() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).unwrap_or_default()
}

/// The tools offered: each service's cached list, but the tools the key may not use, named
/// `{slug}__{tool}` on `/mcp`, each with its price in its `_meta`.
fn list(scope: &[&Service], own_names: bool, allowed: Option<&[String]>) -> Vec<Value> {
    let mut out = Vec::new();
    for s in scope {
        for t in s.tools.as_array().into_iter().flatten() {
            let name = t["name"].as_str().unwrap_or_default();
            if !tool_allowed(allowed, &s.slug, name) {
                continue;
            }
            let mut t = t.clone();
            let Some(o) = t.as_object_mut() else { continue };
            let price = s.price_of(name);
            if !own_names {
                o.insert("name".into(), joined_name(&s.slug, name).into());
            }
            let meta = o.entry("_meta").or_insert_with(|| json!({}));
            if !meta.is_object() {
                *meta = json!({});
            }
            if let Some(m) = meta.as_object_mut() {
                m.insert(PRICE_META.into(), price.into());
            }
            out.push(t);
        }
    }
    out
}

/// One `tools/call`.
struct Call<'a> {
    shared: &'a Shared,
    id: &'a Value,
    /// The agent's params as sent.
    params: Option<&'a RawValue>,
    account: &'a str,
    key: &'a str,
    /// The key's tool allowlist (`None`: every tool); a tool outside it is unknown to the call.
    allowed: Option<&'a [String]>,
    /// The key's budget and member's cap.
    caps: Caps<'a>,
    /// The call is of the 2026-07-28 era.
    is_2026: bool,
    /// The agent's answer became an event stream (the server's notifications relayed).
    opened: bool,
}

impl Call<'_> {
    /// The call, refused or answered: found, admitted, charged, sent, judged, settled.
    async fn run(
        &mut self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        caller: &Caller,
        scope: &[&Service],
        own_names: bool,
    ) -> Result<Box<RawValue>, RpcError> {
        // Every tools/call is a metered request, refused or not: one access-log line each.
        ctx.metered_by = Some(MCP);
        let members = self.params.and_then(raw::object).unwrap_or_default();
        let (Some(params), Some(name)) = (
            self.params,
            raw::get(&members, "name").and_then(raw::as_str),
        ) else {
            return Err(self.err(GatewayError::invalid(
                "params.name: the tool's name is required",
            )));
        };
        let name = name.as_ref();
        let Some((service, tool)) = self.find(scope, own_names, name) else {
            ctx.model_requested = Some(name.to_owned());
            return Err(self.err(GatewayError::invalid(format!(
                "params.name: unknown tool `{name}`"
            ))));
        };
        ctx.model_requested = Some(joined_name(&service.slug, tool));
        if raw::get(&members, "arguments")
            .is_some_and(|a| !matches!(raw::kind(a), Kind::Object | Kind::Null))
        {
            return Err(self.err(GatewayError::invalid("params.arguments: must be an object")));
        }
        // The call counts against the caller's plan like a chat request.
        caller::admit(self.shared, session, ctx, caller)
            .await
            .map_err(|e| self.err(e))?;
        let rt = self.shared.runtime.load_full();
        let facts = ToolCall {
            request_id: &ctx.request_id,
            account_id: self.account,
            key_id: self.key,
            caps: self.caps,
            slug: &service.slug,
            tool,
            developer_id: &service.owner_id,
            price: service.price_of(tool).max(0) as u64,
            share_percent: rt.config.mcp.developer_share_percent,
        };
        let meter = self.shared.meter().map_err(|e| self.err(e))?;
        let charge = self.charge(&meter, &facts, name).await?;
        let started = Instant::now();
        // The agent's params as sent, but for the tool's own name.
        let params = tool_call_params(params, &members, tool);
        let reply = self.send(session, ctx, service, &params).await;
        let elapsed = started.elapsed();
        self.shared
            .metrics
            .mcp_call_latency
            .with_label_values(&[&service.slug])
            .observe(elapsed.as_secs_f64());
        let (answer, ok, status, outcome) = self.judge(reply, &service.slug);
        self.outcome(&service.slug, outcome);
        let call = || TracedCall {
            tool: tool.to_owned(),
            slug: service.slug.clone(),
            price: facts.price,
            outcome,
            start: started,
            end: started + elapsed,
        };
        ctx.trace.tool_call(call, outcome == "upstream_error");
        let latency = elapsed.as_millis() as i64;
        let written = charge
            .settle_tool(&meter, &facts, ok, status, latency)
            .await;
        ctx.charged = written;
        if written.is_none() && ok {
            // The ledger failed: the settlement waits and is retried until it commits (the
            // developer is paid then); the agent gets its result now.
            tracing::error!(request_id = %ctx.request_id, slug = %service.slug, "tool call settlement failed; queued");
        }
        ctx.status = status;
        answer
    }

    fn err(&self, e: GatewayError) -> RpcError {
        RpcError::from_error(self.id.clone(), &e)
    }

    /// The service and tool `name` calls: in `/mcp/{slug}`'s own service by the tool's own
    /// name, else `{slug}__{tool}`; `None` for a tool that is not listed or not the key's.
    fn find<'s, 'n>(
        &self,
        scope: &[&'s Service],
        own_names: bool,
        name: &'n str,
    ) -> Option<(&'s Service, &'n str)> {
        let found = if own_names {
            scope.first().map(|s| (*s, name))
        } else {
            tollgate_filters::mcp::split_name(name)
                .and_then(|(slug, tool)| scope.iter().find(|s| s.slug == slug).map(|s| (*s, tool)))
        };
        found.filter(|(s, t)| s.has_tool(t) && tool_allowed(self.allowed, &s.slug, t))
    }

    /// Holds the call's price as its charge, or refuses the call (the balance or the key's
    /// budget cannot pay it).
    async fn charge(
        &self,
        meter: &crate::metering::Meter<'_>,
        facts: &ToolCall<'_>,
        name: &str,
    ) -> Result<Charge, RpcError> {
        match tool::hold(meter, facts)
            .await
            .map_err(|e| self.err(e.into()))?
        {
            Hold::Placed {
                hold,
                budget,
                reserved,
                ..
            } => Ok(Charge::new(hold, budget).within(reserved)),
            Hold::OverBudget { left, which } => {
                self.outcome(facts.slug, "refused");
                let refusal = crate::metering::holds::over_budget(self.caps, which, left);
                Err(self.err(refusal))
            }
            Hold::Refused { .. } => {
                self.outcome(facts.slug, "refused");
                Err(self.err(GatewayError::new(
                    ErrorKind::InsufficientCredits,
                    format!(
                        "the credit balance cannot pay {} credits for `{name}`",
                        facts.price
                    ),
                )))
            }
        }
    }

    /// Sends the call to its tool server: relaying the server's messages to the agent as an
    /// event stream when the agent accepts one (`self.opened` once it did).
    async fn send(
        &mut self,
        session: &mut Session,
        ctx: &RequestCtx,
        service: &Service,
        params: &[u8],
    ) -> Result<Reply, Failure> {
        let timeout = self.shared.runtime.load().config.mcp.call_timeout;
        let relayed = relay::wanted(session, self.is_2026);
        let up = Upstream::resolve(self.shared, &service.upstream_url, timeout).await?;
        let state = ctx.trace.state.as_deref();
        let up = up
            .for_agent(!self.is_2026)
            .traced(ctx.trace.tool_server(), state);
        match relayed {
            Some(asks) => {
                let sealer = asks::Sealer::new(self.shared, &service.slug, self.account, timeout);
                let (reply, opened) =
                    inputs::call(self.shared, session, ctx, up, params, asks, &sealer).await;
                self.opened = opened;
                reply
            }
            None => up.request("tools/call", Some(params)).await,
        }
    }

    /// What the agent is answered, whether the call is charged, its status for the usage row,
    /// and its outcome for the metrics. A tool's own error is the agent's to see, not charged.
    fn judge(
        &self,
        reply: Result<Reply, Failure>,
        slug: &str,
    ) -> (Result<Box<RawValue>, RpcError>, bool, u16, &'static str) {
        let reply = match reply {
            Err(f) => {
                let e = GatewayError::upstream(format!("tool server `{slug}` {f}"));
                return (Err(self.err(e)), false, 502, "upstream_error");
            }
            Ok(reply) => reply,
        };
        match passthrough(reply) {
            Err(mut e) => {
                e.id = self.id.clone();
                (Err(e), false, 422, "rpc_error")
            }
            Ok(result) => match call_succeeded(&result) {
                Ok(()) => (Ok(result), true, 200, "ok"),
                Err(_) => (Ok(result), false, 422, "tool_error"),
            },
        }
    }

    fn outcome(&self, slug: &str, outcome: &str) {
        self.shared
            .metrics
            .mcp_calls
            .with_label_values(&[slug, outcome])
            .inc();
    }
}
