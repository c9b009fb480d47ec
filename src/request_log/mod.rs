//! The request log: a record of every metered request with a key (a model request of any
//! front door, a tool call; refused inside its handler too), and its payloads where the key,
//! the account or the organization turned payload logging on.
//!
//! On the request path only [`enqueue`] runs (from `proxy::access_log`, at the request's end):
//! it copies the context's facts into a [`Record`] (no JSON, no parsing) and offers it to a
//! bounded queue, dropping it and counting `tollgate_request_log_dropped_total` when the queue
//! is full; it never waits. The payloads were captured while the request ran ([`capture`]).
//! The [`writer`] (a background service) takes records off the queue in batches, redacts
//! their payloads (`tollgate_filters::redact`), caps them and inserts them in one statement
//! (`ledger::request_log`); the reaper nulls payloads and deletes records past their
//! retention ([`writer::expire`]). Account holders and operators read them through [`api`];
//! payload logging is switched by [`settings`] (and a key's own by the keys API).

pub mod api;
pub mod capture;
pub mod settings;
pub mod writer;

use std::sync::OnceLock;
use std::time::Instant;

use prometheus::IntCounter;
use tokio::sync::mpsc;

use crate::ledger::KeyAuth;
use crate::request::ctx::RequestCtx;
use crate::request::timeline::{Leg, Outcome};

/// One metered request's facts, as the request path hands them to the writer.
#[derive(Debug)]
pub struct Record {
    pub request_id: String,
    /// When the request began (ms).
    pub started_ms: i64,
    pub account_id: String,
    pub key_id: String,
    pub member_id: Option<String>,
    pub door: &'static str,
    pub route: &'static str,
    pub model_requested: Option<String>,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub status: u16,
    /// Prompt and completion tokens, when something was served.
    pub tokens: Option<(u64, u64)>,
    /// µcr charged, once the settlement wrote it.
    pub cost: Option<i64>,
    pub latency_ms: i64,
    pub ttft_ms: Option<i64>,
    pub legs: Vec<LegRecord>,
    pub error: Option<String>,
    pub payloads: Option<Box<crate::request::payloads::Payloads>>,
}

/// One upstream leg, its times from the request's start.
#[derive(Debug)]
pub struct LegRecord {
    pub model: String,
    pub provider: String,
    pub endpoint: String,
    pub outcome: &'static str,
    /// A failover's reason label.
    pub reason: Option<&'static str>,
    /// What happened (a failover's, a rejection's or a cut's words).
    pub detail: Option<String>,
    pub start_ms: i64,
    pub duration_ms: i64,
    pub continuation: bool,
}

/// The queue the request path offers records to; installed by the writer when it starts
/// (nothing is recorded before, or when the log is off).
struct Queue {
    tx: mpsc::Sender<Record>,
    dropped: IntCounter,
}

static QUEUE: OnceLock<Queue> = OnceLock::new();

/// Offers the record of a metered request with a key to the writer; drops it (counted) when
/// the queue is full. Called once per request, at its end.
pub fn enqueue(ctx: &RequestCtx) {
    let (Some(q), Some(_), Some(key)) = (QUEUE.get(), ctx.metered_by, ctx.key.as_deref()) else {
        return;
    };
    if q.tx.capacity() == 0 {
        q.dropped.inc();
        return;
    }
    if q.tx.try_send(record(ctx, key)).is_err() {
        q.dropped.inc();
    }
}

fn ms(from: Instant, to: Instant) -> i64 {
    to.saturating_duration_since(from).as_millis() as i64
}

/// The record of `ctx`, called by `key`.
fn record(ctx: &RequestCtx, key: &KeyAuth) -> Record {
    let now = Instant::now();
    let latency_ms = ms(ctx.start, now);
    let served = ctx.served.as_ref();
    let usage = match &ctx.resumed {
        Some(legs) => Some(legs.usage()),
        None => served.map(|d| d.usage),
    };
    Record {
        request_id: ctx.request_id.clone(),
        started_ms: crate::clock::now_ms() - latency_ms,
        account_id: key.account_id.clone(),
        key_id: key.key_id.clone(),
        member_id: key.org_member.as_ref().map(|m| m.account.clone()),
        door: ctx.metered_by.map_or("", |d| d.name),
        route: ctx.route,
        model_requested: ctx.model_requested.clone(),
        model_used: served.map(|d| d.model.clone()),
        provider: served.map(|d| d.provider.clone()),
        status: ctx.status,
        tokens: usage.map(|u| (u.prompt_tokens, u.completion_tokens)),
        cost: ctx.charged.map(|w| w.charged),
        latency_ms,
        ttft_ms: ctx.timeline.first_output.map(|t| ms(ctx.start, t)),
        legs: ctx
            .timeline
            .legs
            .iter()
            .map(|l| leg(l, ctx.start, now))
            .collect(),
        error: ctx.error.clone(),
        payloads: ctx.payloads.as_ref().map(|p| {
            Box::new(crate::request::payloads::Payloads {
                max: p.max,
                request: p.request.clone(),
                request_len: p.request_len,
                response: p.response.clone(),
                response_len: p.response_len,
            })
        }),
    }
}

fn leg(l: &Leg, start: Instant, now: Instant) -> LegRecord {
    let (reason, detail) = match &l.outcome {
        Outcome::Served => (None, None),
        Outcome::Failover { reason, detail } => (Some(*reason), Some(detail.clone())),
        Outcome::Rejected(d) | Outcome::Cut(d) => (None, Some(d.clone())),
    };
    LegRecord {
        model: l.model.clone(),
        provider: l.provider.clone(),
        endpoint: l.endpoint.clone(),
        outcome: l.outcome.label(),
        reason,
        detail,
        start_ms: ms(start, l.start),
        duration_ms: ms(l.start, l.end.unwrap_or(now)),
        continuation: l.continuation,
    }
}
