//! One attempt: one candidate model on one endpoint of its pool. Take a pooled connection from
//! Pingora's connector, write the rewritten request, read the response head, and either fail
//! over (connect error, timeout, 5xx, 429), hand a 400-class rejection to the client, or return
//! what it served (JSON here; streams in `stream.rs`) for the pipeline to settle and answer.

use std::time::Instant;

use bytes::Bytes;
use pingora::upstreams::peer::HttpPeer;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;
use tollgate_filters::trace::TRACEPARENT_LEN;
use tollgate_filters::{tokens, Usage};

use super::front::Front;
use super::tokenize::off_thread;
use crate::config::Timeouts;
use crate::request::ctx::{Delivery, RequestCtx};
use crate::runtime::Shared;
use crate::upstream::failover::{check_status, failover, AttemptError, Failover};
use crate::upstream::head::Request;
use crate::upstream::wire::{self, BodyError, Response};
use crate::upstream::{provider, Endpoint, Pool};

/// Largest non-streaming reply the gateway will buffer from an upstream.
const MAX_UPSTREAM_JSON: usize = 32 * 1024 * 1024;

/// Where one attempt goes.
pub struct Destination<'a> {
    pub model: &'a ModelSpec,
    pub pool: &'a Pool,
    pub endpoint: &'a Endpoint,
    pub peer: HttpPeer,
}

/// Everything one attempt needs: the shared state, the request, where it goes and the body
/// in the candidate's format.
pub struct Attempt<'a> {
    pub shared: &'a Shared,
    pub timeouts: &'a Timeouts,
    pub req: &'a ChatRequest<'a>,
    /// What the client's front door adds (see [`Front`]).
    pub front: Front<'a>,
    pub dest: Destination<'a>,
    pub body: Bytes,
}

/// What an upstream request says of the client's: its id, and the trace it is part of (the
/// span of the leg just begun as its parent: `telemetry::context`).
pub struct Tags<'a> {
    pub request_id: &'a str,
    pub traceparent: Option<[u8; TRACEPARENT_LEN]>,
    pub tracestate: Option<&'a str>,
}

impl<'a> Tags<'a> {
    /// The tags of the request's latest leg.
    pub fn of(ctx: &'a RequestCtx) -> Tags<'a> {
        let leg = ctx.timeline.legs.len().saturating_sub(1);
        let traceparent = ctx.trace.upstream(leg);
        Tags {
            request_id: &ctx.request_id,
            traceparent,
            tracestate: traceparent.and(ctx.trace.state.as_deref()),
        }
    }
}

impl Attempt<'_> {
    fn request(&self, tags: &Tags<'_>) -> Result<Vec<u8>, AttemptError> {
        let d = &self.dest;
        let path = self
            .front
            .door
            .upstream_path(&d.pool.provider, &d.endpoint.url);
        let accept = if self.req.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let build = || -> pingora::Result<Vec<u8>> {
            let mut r = Request::new("POST", &path)?
                .header("Host", &d.endpoint.url.authority())?
                .header("Content-Type", "application/json")?
                // Decompressing upstream replies would cost CPU on every byte; ask for none.
                .header("Accept-Encoding", "identity")?
                .header("Accept", accept)?
                .header("X-Request-Id", tags.request_id)?;
            if let Some(tp) = &tags.traceparent {
                // Hex digits and dashes: always ASCII.
                r = r.header("traceparent", std::str::from_utf8(tp).unwrap_or_default())?;
                if let Some(state) = tags.tracestate {
                    r = r.header("tracestate", state)?;
                }
            }
            if let Some((name, value)) = provider::auth_header(&d.pool.provider) {
                r = r.header(name, &value)?;
            }
            for (name, value) in provider::fixed_headers(&d.pool.provider) {
                r = r.header(name, value)?;
            }
            if let Some((name, value)) = self.front.door.upstream_header(&d.pool.provider) {
                r = r.header(name, value)?;
            }
            Ok(r.body(&self.body))
        };
        build().map_err(|e| failover(Failover::RequestBuild, e))
    }

    /// Opens (or reuses) a connection, sends the request and reads the response head (a
    /// stale pooled connection is retried on a new one inside `wire::exchange`).
    pub async fn send(&self, tags: &Tags<'_>) -> Result<Response, AttemptError> {
        let request = self.request(tags)?;
        let connector = &self.shared.connector;
        wire::exchange(connector, &self.dest.peer, &request)
            .await
            .map_err(|e| match e {
                wire::Failure::Connect(e) => failover(Failover::Connect, e),
                wire::Failure::Exchange(e) => failover(Failover::Send, e),
            })
    }

    /// Gives a connection whose reply was read to the end back to the pool.
    pub fn release(&self, up: Response) {
        let peer = &self.dest.peer;
        up.release(&self.shared.connector, peer, peer.options.idle_timeout);
    }

    /// Records in the context which model and provider served the request, at which rates,
    /// with `usage` (what a stream has used is known only at its end).
    pub fn served(&self, ctx: &mut RequestCtx, usage: Usage, usage_counted: bool) {
        let m = self.dest.model;
        ctx.served = Some(Delivery {
            model: m.id.clone(),
            provider: self.dest.pool.provider.name.clone(),
            rates: m.rates(),
            usage,
            usage_counted,
        });
        ctx.status = 200;
    }

    /// A non-streaming attempt: the whole reply within `deadline`, rewritten in the client's
    /// format; returns it, for the pipeline to settle and send.
    pub async fn json(
        &self,
        ctx: &mut RequestCtx,
        deadline: Instant,
    ) -> Result<Vec<u8>, AttemptError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let exchange = async {
            let mut up = self.send(&Tags::of(ctx)).await?;
            check_status(&mut up, self.timeouts.stream_chunk).await?;
            let buf = match up.read_to_end(MAX_UPSTREAM_JSON).await {
                Ok(buf) => buf,
                Err(BodyError::TooLarge) => {
                    return Err(failover(Failover::BadReply, "upstream reply too large"))
                }
                Err(BodyError::Read(e)) => return Err(failover(Failover::Read, e)),
            };
            Ok((up, buf))
        };
        // On Pingora's timer wheel (10 ms resolution), not tokio's: a tokio timer earlier than
        // every other one (the common case when few requests are in flight) unparks the I/O
        // driver with an eventfd write, and wakes the other worker when that one holds it;
        // measured at 1,000 req/s: 0.90 -> 0.50 eventfd writes per request.
        let (up, buf) = match pingora::time::timeout(remaining, exchange).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(failover(
                    Failover::Timeout,
                    format!("no complete reply within {remaining:?}"),
                ))
            }
        };
        self.release(up);

        let model = &self.dest.model.id;
        let (door, wire, provider) = (self.front.door, ctx.wire, &self.dest.pool.provider);
        let mut text = None;
        let mut keep_text = |t: &str| {
            text = Some(t.to_owned());
            Usage::default()
        };
        let (mut out, mut usage, counted) = door
            .reply(wire, provider, &buf, model, &mut keep_text)
            .map_err(|e| failover(Failover::BadReply, e))?;
        if let (true, Some(text)) = (counted, text) {
            // No usage from the upstream: count off the proxy thread (the tokenizer is loaded on
            // first use, and a hostile text is long), then write the counted usage in.
            let messages = self.req.get("messages").map(|m| m.get().to_owned());
            let counted = off_thread(self.shared, move || Usage {
                prompt_tokens: messages.as_deref().map_or(0, tokens::count_prompt_json),
                completion_tokens: tokens::count_text(&text),
                ..Usage::default()
            })
            .await
            .unwrap_or_default();
            (out, usage, _) = door
                .reply(wire, provider, &buf, model, &mut |_| counted)
                .map_err(|e| failover(Failover::BadReply, e))?;
        }
        if let Some(fill) = ctx.cache_fill.as_mut() {
            let mut r = fill.recording();
            r.record(&buf);
            fill.complete(r);
        }
        self.served(ctx, usage, counted);
        Ok(out)
    }
}
