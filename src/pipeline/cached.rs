//! The response cache on the pipeline (docs/caching.md, "Response cache"): after the hold, a request
//! that opted in is looked up; a hit is answered from the stored upstream reply through its
//! door's own translation (the same body, or the same stream events, with the hit's own cost)
//! and settled at the configured fraction of its list price, with no upstream call. A miss
//! goes upstream as the first of its kind on this instance (the others wait for it: single
//! flight), its reply recorded and stored once it is settled.

use std::time::Duration;

use bytes::Bytes;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::openai::stream::StreamStep;
use tollgate_filters::route::Target;
use tollgate_filters::sse::SseDecoder;
use tollgate_filters::GatewayError;

use super::cut::send;
use super::forward::Reply;
use super::front::Front;
use super::stream::{Replayed, MAX_SSE_EVENT};
use crate::auth::caller::Caller;
use crate::request::ctx::{Delivery, RequestCtx};
use crate::request::{respond, Session};
use crate::response_cache::flight::{self, Joined};
use crate::response_cache::store::{Entry, Store};
use crate::response_cache::{decide, Decision, Fill, Lookup};
use crate::runtime::{Runtime, Shared};

const HEADER: &str = "X-Tollgate-Cache";

/// Looks a held request up: its reply when the cache has it (then nothing goes upstream),
/// else `None`, the request then recorded for the cache if it opted in.
pub async fn look_up(
    shared: &Shared,
    rt: &Runtime,
    (session, ctx): (&mut Session, &mut RequestCtx),
    caller: &Caller,
    req: &ChatRequest<'_>,
    front: &Front<'_>,
) -> Result<Option<Reply>, GatewayError> {
    let (wallet, setting) = match (caller, ctx.metered.is_some()) {
        (Caller::Key(k), true) => (Some(k.account_id.as_str()), k.response_cache),
        _ => (None, false),
    };
    let door = ctx.metered_by.map_or("model", |d| d.name);
    let lookup = match decide(&front.cache, req, door, wallet, setting) {
        Decision::Off => return Ok(None),
        Decision::Bypass => {
            said(shared, ctx, "bypass");
            return Ok(None);
        }
        Decision::Use(l) => l,
    };
    let Some(store) = store_of(shared) else {
        said(shared, ctx, "bypass");
        return Ok(None);
    };
    let config = rt.config.response_cache;
    // Joined before the read: a leader still storing its entry is waited for, and one done
    // has stored it before this read, so a request right after its twin always hits.
    let mut leading = match shared.response_flights.join(&lookup.key) {
        Joined::Lead(l) => Some(l),
        Joined::Follow(rx) => {
            // The leader's reply is bounded by the response timeout; past it, go on alone.
            let bound = rt.config.timeouts.response.max(Duration::from_secs(1));
            flight::wait(rx, bound).await;
            None
        }
    };
    if let Some(e) = store.get(&lookup.key, crate::clock::now_ms()).await {
        // A hit leads nothing: its twins read the store too, without waiting for its answer.
        drop(leading.take());
        if let Some(reply) = answer(rt, (session, ctx), req, front, e).await? {
            shared
                .metrics
                .response_cache
                .with_label_values(&["hit"])
                .inc();
            return Ok(Some(reply));
        }
    }
    said(shared, ctx, "miss");
    ctx.cache_fill = Some(Box::new(Fill::new(lookup, config.max_entry_bytes, leading)));
    Ok(None)
}

/// What the cache did, told the client and counted; a hit is told by [`answer`].
fn said(shared: &Shared, ctx: &mut RequestCtx, what: &'static str) {
    ctx.set_header(HEADER, what.into());
    shared
        .metrics
        .response_cache
        .with_label_values(&[what])
        .inc();
}

/// The store of this gateway: Redis when configured (none while it is still connecting: the
/// request goes without the cache), else the ledger.
fn store_of(shared: &Shared) -> Option<Store> {
    if let Some(r) = &shared.limiter.redis {
        return r.conn().map(|conn| Store::Redis {
            conn,
            prefix: r.prefix().to_owned(),
            timeout: shared.storage.redis_timeout,
        });
    }
    shared.ledger.get().cloned().map(Store::Ledger)
}

/// A hit's answer: the stored reply through the door's translation, the request marked as
/// served by the entry's model at the hit's fraction of its price. `None` when the entry's
/// model or provider is no longer configured (a miss).
async fn answer(
    rt: &Runtime,
    (session, ctx): (&mut Session, &mut RequestCtx),
    req: &ChatRequest<'_>,
    front: &Front<'_>,
    e: Entry,
) -> Result<Option<Reply>, GatewayError> {
    let now = crate::clock::now_ms();
    let catalog = &rt.config.catalog;
    let spec = match catalog.resolve(&e.model, now.div_euclid(1000)) {
        Ok(r) => match r.target {
            Target::Model(i) => catalog.model(i),
            Target::Tier(_) => return Ok(None),
        },
        Err(_) => return Ok(None),
    };
    let Some(pool) = rt.pools.get(&e.provider) else {
        return Ok(None);
    };
    let provider = &pool.provider;
    ctx.set_header(HEADER, "hit".into());
    ctx.set_header("Age", ((now - e.stored_at).max(0) / 1000).to_string());
    ctx.served = Some(Delivery {
        model: e.model.clone(),
        provider: e.provider.clone(),
        rates: spec.rates(),
        usage: e.usage,
        usage_counted: false,
    });
    ctx.status = 200;
    ctx.cache_hit = Some(rt.config.response_cache.charge_ppm);
    if !req.stream {
        let usage = e.usage;
        let (out, _, _) = front
            .door
            .reply(ctx.wire, provider, &e.raw, &e.model, &mut |_| usage)
            .map_err(GatewayError::upstream)?;
        return Ok(Some(Reply::Json(out)));
    }
    let mut rewriter =
        front
            .door
            .stream(ctx.wire, provider, &e.model, req.client_wants_usage, false);
    let mut events = Vec::new();
    SseDecoder::new(MAX_SSE_EVENT)
        .push(&e.raw, &mut events)
        .map_err(|err| GatewayError::upstream(err.to_string()))?;
    let mut out = Vec::new();
    for ev in events {
        match rewriter.on_event(ev.event.as_deref(), &ev.data) {
            StreamStep::Emit(b) => out.extend_from_slice(&b),
            StreamStep::Done => break,
            // Only clean streams are stored.
            StreamStep::UpstreamError(_) => break,
        }
    }
    rewriter.end(e.usage, None);
    let write_limit = rt.config.timeouts.client_write;
    let Some(mut h) = respond::header(200, ctx, &[]) else {
        return Err(GatewayError::internal("could not build response header"));
    };
    let _ = h.insert_header("Content-Type", rewriter.content_type());
    let _ = h.insert_header("Cache-Control", "no-cache");
    if !session.is_http2() {
        let _ = h.insert_header("Transfer-Encoding", "chunked");
    }
    ctx.timeline.output();
    let gone = session.write_response_header(Box::new(h)).await.is_err()
        || !send(session, Bytes::from(out), false, write_limit).await;
    ctx.client_gone = gone;
    Ok(Some(Reply::Replay(Box::new(Replayed {
        rewriter: (!gone).then_some(rewriter),
        usage: e.usage,
        write_limit,
    }))))
}

/// Once the request is settled: its recorded reply stored, if it was served whole, off the
/// request path; the leader's place given up when it is written (or at once when there is
/// nothing to write).
pub fn store(shared: &Shared, ctx: &mut RequestCtx) {
    let Some(mut fill) = ctx.cache_fill.take() else {
        return;
    };
    let whole = ctx.status == 200 && ctx.error.is_none() && ctx.resumed.is_none();
    let (Some(raw), Some(d), true) = (fill.take(), ctx.served.as_ref(), whole) else {
        return;
    };
    let Some(store) = store_of(shared) else {
        return;
    };
    let config = shared.runtime.load().config.response_cache;
    let now = crate::clock::now_ms();
    let entry = Entry {
        provider: d.provider.clone(),
        model: d.model.clone(),
        usage: d.usage,
        stored_at: now,
        expires_at: now + config.ttl.as_millis() as i64,
        raw,
    };
    tokio::spawn(async move {
        let Lookup { key, wallet } = &fill.lookup;
        store
            .put((key, wallet), &entry, config.max_total_bytes)
            .await;
        drop(fill);
    });
}
