//! Where a metered model request is charged and answered: its charge ([`Charge`], the
//! context's one metered slot) settled once at what was served, then the answer with what it
//! cost. Every front door ends here (`settle_and_answer`); the proxy calls [`settle`] after the
//! handler only for a request whose future was dropped first.
//!
//! [`Charge`]: crate::metering::charge::Charge

use tollgate_filters::cost::{add_to_usage, Cost, Spelling};
use tollgate_filters::credits::{format_credits, parts_at};
use tollgate_filters::GatewayError;

use super::forward::Reply;
use super::stream;
use crate::metering::{Meter, Served};
use crate::request::ctx::{RequestCtx, Wire};
use crate::request::{respond, Session};
use crate::runtime::Shared;

/// Settles the metered request, if it is still held: at what was served (nothing when no
/// model produced output), once. The balance after it goes out as `X-Credits-Remaining`.
/// Called by the pipeline before its answer's last bytes, and by the proxy after the
/// handler for a request whose future was dropped first.
pub async fn settle(ctx: &mut RequestCtx, meter: &Meter<'_>) {
    let Some(charge) = ctx.metered.take() else {
        return;
    };
    let d = ctx.served.as_ref();
    let served = Served {
        request_id: &ctx.request_id,
        model_requested: ctx.model_requested.as_deref().unwrap_or_default(),
        model_used: d.map(|d| d.model.as_str()),
        provider: d.map(|d| d.provider.as_str()),
        usage: match &ctx.resumed {
            Some(legs) => legs.usage(),
            None => d.map(|d| d.usage).unwrap_or_default(),
        },
        rates: d.map(|d| d.rates),
        status: ctx.status,
        latency_ms: ctx.start.elapsed().as_millis() as i64,
        hold_note: None,
        legs: ctx.resumed.as_ref(),
        hit: ctx.cache_hit,
    };
    let began = std::time::Instant::now();
    let written = charge.settle(meter, served).await;
    ctx.timeline.settlement = Some((began, std::time::Instant::now()));
    if let Some(w) = written {
        ctx.charged = Some(w);
        ctx.set_header("X-Credits-Remaining", format_credits(w.balance));
    }
}

/// Ends a metered request of any front door: the one settlement on the request path, once
/// what was served is known and before the answer's last bytes (a JSON answer carries the
/// balance after it, and a stream's closing events, `[DONE]` or `message_stop`, come after
/// it, so a client that reads its balance then sees the charge: DESIGN.md, Rules: One
/// balance), then the answer, which tells what the request cost (DESIGN.md, Rules: Cost
/// shown): `usage.cost` and `usage.cost_details` in a JSON reply's usage object (one scan of
/// the reply's top level, no tree) and `X-Credits-Charged`; a stream's in its final usage. A
/// failure before any output settles at nothing.
pub async fn settle_and_answer(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    result: Result<Reply, GatewayError>,
) -> Result<(), GatewayError> {
    if let Err(e) = &result {
        ctx.status = e.status();
    }
    if ctx.metered.is_some() {
        settle(ctx, &shared.meter()?).await;
    }
    super::cached::store(shared, ctx);
    let cost = settled_cost(ctx);
    match result? {
        Reply::Json(mut body) => {
            if let Some(c) = &cost {
                ctx.set_header("X-Credits-Charged", format_credits(c.charged));
                let (member, spelling) = match ctx.wire {
                    Wire::Gemini => ("usageMetadata", Spelling::Camel),
                    _ => ("usage", Spelling::Snake),
                };
                body = add_to_usage(&body, member, c, spelling).unwrap_or(body);
            }
            crate::request_log::capture::reply(ctx, &body);
            respond::send(session, ctx, 200, "application/json", body, &[]).await;
        }
        Reply::Stream(s) => stream::close(*s, shared, session, ctx, cost.as_ref()).await,
        Reply::Replay(r) => stream::close_replayed(*r, session, ctx, cost.as_ref()).await,
    }
    Ok(())
}

/// What the settlement charged, with its parts at the rates of the model that served: `None`
/// for a guest (nothing metered) and while a settlement waits for the ledger (its amount is
/// shown by `/api/v1/usage` once written).
fn settled_cost(ctx: &RequestCtx) -> Option<Cost> {
    let written = ctx.charged?;
    if let Some(legs) = &ctx.resumed {
        // Each leg's part at its own model's rates.
        return Some(Cost {
            charged: written.charged,
            parts: legs.parts(),
        });
    }
    let served = ctx.served.as_ref()?;
    if let Some(ppm) = ctx.cache_hit {
        // A cache hit's parts are its fraction of the list price, as its charge is.
        return Some(Cost {
            charged: written.charged,
            parts: parts_at(served.usage.saturated(), &served.rates).scaled(ppm),
        });
    }
    Some(Cost::new(written.charged, served.usage, &served.rates))
}
