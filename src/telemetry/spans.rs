//! A finished request as spans, after the OpenTelemetry GenAI semantic conventions: one SERVER
//! span for the request (`{gen_ai.operation.name} {gen_ai.request.model}`), a CLIENT span per
//! upstream leg of its timeline (failed over, rejected, cut or served, and a resumed stream's
//! continuations, each with its outcome and reason), an INTERNAL span for its settlement, and
//! a CLIENT span for a tool call (`execute_tool {tool}`). Ids, model names, counts and
//! outcomes only: never a key, a prompt or a reply.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tollgate_filters::trace::{child_span_id, Attribute, Kind, Span, StatusCode, Value};

use super::context::{Ids, ToolCall, SETTLEMENT_TAG, TOOL_TAG};
use crate::config::Config;
use crate::request::ctx::RequestCtx;
use crate::request::timeline::{Leg, Outcome};

/// Longest error text a span carries (a failover's detail, a cut's reason).
const MAX_DETAIL: usize = 256;

/// Instants as Unix nanoseconds: one reading of both clocks at the request's end.
struct Clock {
    now: Instant,
    unix_nanos: u64,
}

impl Clock {
    fn new() -> Clock {
        let unix_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            now: Instant::now(),
            unix_nanos,
        }
    }

    fn at(&self, i: Instant) -> u64 {
        let ago = self.now.saturating_duration_since(i).as_nanos() as u64;
        self.unix_nanos.saturating_sub(ago)
    }
}

/// Whether the request failed in a way that is always traced: a 5xx, an upstream that failed
/// (every candidate) or cut a stream after its first output, a tool server that failed.
pub fn failed(ctx: &RequestCtx) -> bool {
    ctx.status >= 500
        || ctx
            .trace
            .tool
            .as_ref()
            .is_some_and(|c| c.outcome == "upstream_error")
        || ctx
            .timeline
            .legs
            .iter()
            .any(|l| matches!(l.outcome, Outcome::Cut(_)))
        || (ctx.served.is_none()
            && !ctx.timeline.legs.is_empty()
            && ctx
                .timeline
                .legs
                .iter()
                .all(|l| matches!(l.outcome, Outcome::Failover { .. })))
}

/// The spans of a finished, sampled request.
pub fn of(ctx: &RequestCtx, config: &Config) -> Vec<Span> {
    let t = &Trace {
        ids: ctx.trace.ids(),
        state: ctx.trace.state.as_deref().unwrap_or_default(),
    };
    let clock = Clock::new();
    let failed = failed(ctx);
    let mut spans = Vec::with_capacity(ctx.timeline.legs.len() + 2);
    spans.push(server(ctx, t, config, &clock, failed));
    let op = operation(ctx.metered_by.map_or("own", |d| d.name));
    for (i, leg) in ctx.timeline.legs.iter().enumerate() {
        spans.push(upstream(t, (i, leg, op), config, &clock));
    }
    if let Some((start, end)) = ctx.timeline.settlement {
        let mut s = child(t, SETTLEMENT_TAG, "settle credits".into(), Kind::Internal);
        s.start_unix_nano = clock.at(start);
        s.end_unix_nano = clock.at(end);
        s.attributes.push(Attribute::new(
            "tollgate.settlement.committed",
            Value::Bool(ctx.charged.is_some_and(|w| !w.in_lease)),
        ));
        if let Some(w) = ctx.charged {
            s.attributes.push(cost(w.charged));
        }
        spans.push(s);
    }
    if let Some(call) = &ctx.trace.tool {
        spans.push(tool(t, call, &clock));
    }
    spans
}

/// The request's trace as its spans name it.
struct Trace<'a> {
    ids: Ids,
    state: &'a str,
}

/// A span of the request's trace whose parent is the request's own span.
fn child(t: &Trace, tag: u64, name: String, kind: Kind) -> Span {
    Span {
        trace_id: t.ids.trace_id,
        span_id: child_span_id(t.ids.span_id, tag),
        parent_span_id: t.ids.span_id,
        trace_state: t.state.to_owned(),
        name,
        kind,
        start_unix_nano: 0,
        end_unix_nano: 0,
        attributes: Vec::new(),
        status: StatusCode::Unset,
        status_message: String::new(),
        flags: 0x101,
    }
}

fn text(key: &'static str, v: &str) -> Attribute {
    Attribute::new(key, Value::Str(v.to_owned()))
}

fn int(key: &'static str, v: u64) -> Attribute {
    Attribute::new(key, Value::Int(v.min(i64::MAX as u64) as i64))
}

/// The cost in credits (integer micro-credits inside; a number at the edge).
fn cost(micros: i64) -> Attribute {
    Attribute::new(
        "tollgate.cost.credits",
        Value::Double(micros as f64 / 1_000_000.0),
    )
}

/// The GenAI operation of a front door.
fn operation(door: &str) -> &'static str {
    match door {
        "embeddings" => "embeddings",
        "completions" => "text_completion",
        "gemini" => "generate_content",
        "mcp" => "execute_tool",
        _ => "chat",
    }
}

/// `gen_ai.provider.name`: the provider's kind (`openai`, `anthropic`), the convention's
/// well-known names; the configured pool's own name goes in `tollgate.provider`.
fn provider_kind(config: &Config, name: &str) -> &'static str {
    config
        .providers
        .iter()
        .find(|p| p.name == name)
        .map_or("unknown", |p| p.kind.as_str())
}

fn server(ctx: &RequestCtx, t: &Trace, config: &Config, clock: &Clock, failed: bool) -> Span {
    let route = (ctx.trace.method, ctx.trace.route);
    let door = ctx.metered_by.map_or("own", |d| d.name);
    let op = operation(door);
    let requested = ctx.model_requested.as_deref().unwrap_or_default();
    let name = match door {
        "mcp" => format!("tools/call {requested}"),
        _ => format!("{op} {requested}"),
    };
    let mut a = vec![
        text("http.request.method", route.0),
        text("http.route", route.1),
        int("http.response.status_code", u64::from(ctx.status)),
        text("tollgate.request.id", &ctx.request_id),
    ];
    if door == "mcp" {
        a.push(text("mcp.method.name", "tools/call"));
        a.push(text("gen_ai.tool.name", requested));
    } else {
        a.push(text("gen_ai.operation.name", op));
        a.push(text("gen_ai.request.model", requested));
    }
    if let Some(d) = &ctx.served {
        a.push(text("gen_ai.response.model", &d.model));
        a.push(text(
            "gen_ai.provider.name",
            provider_kind(config, &d.provider),
        ));
        a.push(text("tollgate.provider", &d.provider));
        let usage = ctx.resumed.as_ref().map_or(d.usage, |l| l.usage());
        a.push(int("gen_ai.usage.input_tokens", usage.prompt_tokens));
        a.push(int("gen_ai.usage.output_tokens", usage.completion_tokens));
    }
    if let Some(w) = ctx.charged {
        a.push(cost(w.charged));
    }
    if let Some(k) = &ctx.key {
        a.push(text("tollgate.key.id", &k.key_id));
        a.push(text("tollgate.account.id", &k.account_id));
        if let Some(m) = &k.org_member {
            a.push(text("tollgate.organization.id", &m.org));
        }
    }
    if let Some(first) = ctx.timeline.first_output {
        let ttft = first.saturating_duration_since(ctx.start).as_secs_f64();
        a.push(Attribute::new(
            "gen_ai.server.time_to_first_token",
            Value::Double(ttft),
        ));
    }
    let mut status = StatusCode::Unset;
    let mut message = String::new();
    if ctx.status >= 400 || failed {
        let kind = match ctx.status {
            s if s >= 400 => s.to_string(),
            _ => "stream_cut".to_owned(),
        };
        a.push(Attribute::new("error.type", Value::Str(kind)));
    }
    if failed {
        status = StatusCode::Error;
        if ctx.status >= 500 {
            message = clip(ctx.error.as_deref().unwrap_or_default());
        }
    }
    Span {
        trace_id: t.ids.trace_id,
        span_id: t.ids.span_id,
        parent_span_id: t.ids.parent,
        trace_state: t.state.to_owned(),
        name,
        kind: Kind::Server,
        start_unix_nano: clock.at(ctx.start),
        end_unix_nano: clock.unix_nanos,
        attributes: a,
        status,
        status_message: message,
        // Sampled; whether the parent is remote is known, and it is when a client sent it.
        flags: 0x101 | if t.ids.parent != 0 { 0x200 } else { 0 },
    }
}

/// Leg `i` of the timeline, an `op` (the request's operation): the span whose id its upstream
/// request carried.
fn upstream(
    t: &Trace,
    (i, leg, op): (usize, &Leg, &'static str),
    config: &Config,
    clock: &Clock,
) -> Span {
    let name = format!("{op} {}", leg.model);
    let mut s = child(t, i as u64 + 1, name, Kind::Client);
    s.start_unix_nano = clock.at(leg.start);
    s.end_unix_nano = leg.end.map_or(clock.unix_nanos, |e| clock.at(e));
    let (host, port) = match leg.endpoint.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => (h, p.parse::<u16>().ok()),
        _ => (leg.endpoint.as_str(), None),
    };
    let a = &mut s.attributes;
    a.push(text("gen_ai.operation.name", op));
    a.push(text("gen_ai.request.model", &leg.model));
    a.push(text(
        "gen_ai.provider.name",
        provider_kind(config, &leg.provider),
    ));
    a.push(text("tollgate.provider", &leg.provider));
    a.push(text("server.address", host));
    if let Some(p) = port {
        a.push(int("server.port", u64::from(p)));
    }
    a.push(text("tollgate.attempt.outcome", leg.outcome.label()));
    a.push(Attribute::new(
        "tollgate.attempt.continuation",
        Value::Bool(leg.continuation),
    ));
    match &leg.outcome {
        Outcome::Served => {}
        // The provider's refusal may quote the request: only that it refused is said.
        Outcome::Rejected(_) => a.push(text("error.type", "rejected")),
        Outcome::Failover { reason, detail } => {
            a.push(text("tollgate.failover.reason", reason));
            a.push(text("error.type", reason));
            s.status = StatusCode::Error;
            s.status_message = clip(detail);
        }
        Outcome::Cut(why) => {
            a.push(text("error.type", "stream_cut"));
            s.status = StatusCode::Error;
            s.status_message = clip(why);
        }
    }
    s
}

fn tool(t: &Trace, call: &ToolCall, clock: &Clock) -> Span {
    let mut s = child(
        t,
        TOOL_TAG,
        format!("execute_tool {}", call.tool),
        Kind::Client,
    );
    s.start_unix_nano = clock.at(call.start);
    s.end_unix_nano = clock.at(call.end);
    s.attributes = vec![
        text("gen_ai.operation.name", "execute_tool"),
        text("gen_ai.tool.name", &call.tool),
        text("gen_ai.tool.type", "extension"),
        text("tollgate.tool_server.slug", &call.slug),
        int("tollgate.tool.price_credits", call.price),
        text("tollgate.tool.outcome", call.outcome),
    ];
    if call.outcome != "ok" {
        s.attributes.push(text("error.type", call.outcome));
        s.status = StatusCode::Error;
    }
    s
}

/// At most [`MAX_DETAIL`] bytes of `s`, cut at a character boundary.
fn clip(s: &str) -> String {
    let mut end = s.len().min(MAX_DETAIL);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
