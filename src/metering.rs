//! Credits on the chat path: the hold before forwarding and the settlement after
//! (DESIGN.md, Rules: Credits).
//!
//! The hold covers the prompt (estimated without the tokenizer) and `max_tokens` at the highest
//! rates among the route's candidates, since failover may land on any of them; when the balance
//! cannot pay for all of that, `max_tokens` sent upstream is lowered to what it can pay. The
//! settlement charges the actual usage at the rates of the model that served the request.
//!
//! Both go against this instance's credit lease of the account when it has one (in memory, the
//! usage row written in the next batch; src/leases.rs), else against the database directly.

use tollgate_filters::credits::{self, format_credits, plan_hold};
use tollgate_filters::route::Catalog;
use tollgate_filters::validate::ChatRequest;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::proxy::{Gateway, RequestCtx};
use crate::store::{KeyAuth, Settlement};

/// A placed hold, carried in the request context until settlement.
#[derive(Debug, Clone)]
pub struct Metering {
    pub account_id: String,
    pub key_id: String,
    pub held: i64,
    /// The lease the hold was placed against (src/leases.rs); `None`: a hold row of its own.
    pub lease: Option<std::sync::Arc<str>>,
}

/// Places the hold for a keyed request. Returns the `max_tokens` to send upstream (`None`:
/// leave the client's value, or its absence, as it is).
pub async fn hold(
    gw: &Gateway,
    ctx: &mut RequestCtx,
    key: &KeyAuth,
    catalog: &Catalog,
    plan: &[usize],
    req: &ChatRequest,
) -> Result<Option<u64>, GatewayError> {
    let ledger = gw.ledger()?;
    let models = plan.iter().map(|&i| catalog.model(i));
    let (mut max_in, mut max_out, mut max_output_tokens) = (0u64, 0u64, 1u64);
    for m in models {
        max_in = max_in.max(m.input_micros_per_1k);
        max_out = max_out.max(m.output_micros_per_1k);
        max_output_tokens = max_output_tokens.max(m.max_output_tokens);
    }
    let max_tokens = req
        .max_tokens
        .unwrap_or(max_output_tokens)
        .min(max_output_tokens);
    let prompt = credits::estimate_prompt_tokens(
        req.body.get("messages").unwrap_or(&serde_json::Value::Null),
    );
    let hp = plan_hold(prompt, max_tokens, max_in, max_out);
    let leases = &gw.shared.leases;
    if let Some(l) = leases.hold(ledger, &key.account_id, &hp).await? {
        gw.shared
            .metrics
            .credit_holds
            .with_label_values(&["lease"])
            .inc();
        ctx.set_header("X-Credits-Remaining", format_credits(l.balance));
        ctx.metering = Some(Metering {
            account_id: key.account_id.clone(),
            key_id: key.key_id.clone(),
            held: l.held,
            lease: Some(l.lease_id),
        });
        let affordable = hp.affordable_tokens(l.held, max_tokens);
        return Ok((affordable < max_tokens).then_some(affordable));
    }
    let expires = crate::now_ms() + (gw.shared.storage.hold_ttl_secs * 1000.0) as i64;
    let Some((held, balance)) = ledger
        .hold(&ctx.request_id, &key.account_id, &hp, expires)
        .await?
    else {
        if let Some(a) = ledger.account(&key.account_id).await? {
            let shown = a.balance + leases.available(&key.account_id);
            ctx.set_header("X-Credits-Remaining", format_credits(shown));
        }
        return Err(GatewayError::new(
            ErrorKind::InsufficientCredits,
            "the credit balance cannot pay for this request's prompt and one output token",
        ));
    };
    let shown = balance + leases.available(&key.account_id);
    ctx.set_header("X-Credits-Remaining", format_credits(shown));
    gw.shared
        .metrics
        .credit_holds
        .with_label_values(&["database"])
        .inc();
    ctx.metering = Some(Metering {
        account_id: key.account_id.clone(),
        key_id: key.key_id.clone(),
        held,
        lease: None,
    });
    let affordable = hp.affordable_tokens(held, max_tokens);
    Ok((affordable < max_tokens).then_some(affordable))
}

/// Settles the request's hold, once: the actual cost of the model used (nothing when no model
/// produced output), one usage row, and `X-Credits-Remaining` set to the balance after it.
pub async fn settle(gw: &Gateway, ctx: &mut RequestCtx) {
    let Some(m) = ctx.metering.take() else { return };
    let Ok(ledger) = gw.ledger() else { return };
    let usage = ctx.usage.unwrap_or_default();
    let cost = match ctx.rates {
        Some((input, output)) => credits::cost(usage, input, output),
        None => 0,
    };
    let s = Settlement {
        hold_id: ctx.request_id.clone(),
        request_id: ctx.request_id.clone(),
        account_id: m.account_id,
        key_id: Some(m.key_id),
        model_requested: ctx.model_requested.clone().unwrap_or_default(),
        model_used: ctx.model_used.clone(),
        provider: ctx.provider.clone(),
        prompt_tokens: usage.prompt_tokens as i64,
        completion_tokens: usage.completion_tokens as i64,
        cost,
        status: i64::from(if ctx.status == 0 { 200 } else { ctx.status }),
        latency_ms: ctx.start.elapsed().as_millis() as i64,
        now_ms: crate::now_ms(),
    };
    let s = match &m.lease {
        Some(lease) => match gw.shared.leases.settle(lease, m.held, s) {
            Ok((charged, balance)) => {
                ctx.charged = Some(charged);
                ctx.set_header("X-Credits-Remaining", format_credits(balance));
                return;
            }
            // The lease is gone (refunded by the reaper): its money is back in the balance,
            // so charge the balance directly.
            Err(s) => *s,
        },
        None => s,
    };
    match ledger.settle(&s).await {
        Ok(done) => {
            ctx.charged = Some(done.charged);
            let shown = done.balance + gw.shared.leases.available(&s.account_id);
            ctx.set_header("X-Credits-Remaining", format_credits(shown));
        }
        // The hold stays and expires; the reaper refunds it. Nothing is charged twice.
        Err(e) => {
            tracing::error!(request_id = %ctx.request_id, "settlement failed, hold left to expire: {e}")
        }
    }
}
