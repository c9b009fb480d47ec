//! `POST /api/v1/billing/webhook`: Stripe's events, signed. The signature is checked over the
//! raw body before anything is parsed (400 and nothing applied on any failure); each event is
//! then applied by the ledger in one transaction with its record, so a redelivery or a
//! concurrent delivery to another instance changes nothing. Every answer after the signature
//! check is 200 (recorded) unless the store or Stripe itself failed, when a 5xx makes Stripe
//! deliver again later.

use pingora::proxy::Session;
use serde_json::{json, Value};
use tollgate_filters::stripe::{
    int_at, invoice_subscription, price_ids, secrets, str_at, verify, TOLERANCE_SECS,
};
use tollgate_filters::{ErrorKind, GatewayError};

use super::{billing_config, stripe_api};
use crate::config::{Billing, Config};
use crate::ledger::payment_events::{Applied, CheckoutPaid, Clawback, Renewal, SubscriptionChange};
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond};
use crate::runtime::Shared;

/// Stripe's events are a few kilobytes; this leaves room for large line-item lists.
const MAX_EVENT_BYTES: usize = 512 * 1024;

pub async fn webhook(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load_full();
    let raw = body::read(session, MAX_EVENT_BYTES, rt.config.timeouts.request_body).await?;
    let billing = billing_config(&rt.config)?;
    let header = session
        .req_header()
        .headers
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok());
    let list = billing.webhook_secrets();
    let keys = secrets(&list);
    if keys.is_empty() {
        tracing::error!(
            "a Stripe webhook arrived but {} is not set: refused",
            billing.webhook_secret_env
        );
        return Err(GatewayError::new(
            ErrorKind::ServiceUnavailable,
            "the webhook signing secret is not configured",
        ));
    }
    let now = crate::clock::now_secs();
    verify(header, &raw, &keys, now, TOLERANCE_SECS)
        .map_err(|e| GatewayError::invalid(format!("Stripe-Signature: {e}")))?;
    let event: Value = serde_json::from_slice(&raw)
        .map_err(|e| GatewayError::invalid(format!("body: malformed JSON ({e})")))?;
    let (Some(id), Some(ty)) = (str_at(&event, &["id"]), str_at(&event, &["type"])) else {
        return Err(GatewayError::invalid("body: an event needs id and type"));
    };
    let obj = &event["data"]["object"];
    if !obj.is_object() {
        return Err(GatewayError::invalid("body: data.object must be an object"));
    }
    let applied = apply(shared, &rt.config, billing, id, ty, obj).await?;
    let (duplicate, outcome, account) = match &applied {
        Applied::Duplicate => (true, "already received: nothing changed".to_owned(), None),
        Applied::Done {
            outcome,
            account_id,
            ..
        } => (false, outcome.clone(), account_id.clone()),
    };
    if let Some(a) = &account {
        // The plan may have changed: this instance's next request for it reads it anew.
        shared.keys.evict_account(a);
    }
    tracing::info!(event = %id, r#type = %ty, duplicate, "stripe event: {outcome}");
    let v = json!({"received": true, "id": id, "duplicate": duplicate, "outcome": outcome});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

async fn apply(
    shared: &Shared,
    config: &Config,
    billing: &Billing,
    id: &str,
    ty: &str,
    obj: &Value,
) -> Result<Applied, GatewayError> {
    let ledger = shared.ledger()?;
    let now = crate::clock::now_ms();
    let s = |path: &[&str]| str_at(obj, path).map(str::to_owned);
    match ty {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            if ty == "checkout.session.completed"
                && s(&["payment_status"]).as_deref() == Some("unpaid")
            {
                return Ok(ledger
                    .record_event(
                        id,
                        ty,
                        "unpaid: waiting for checkout.session.async_payment_succeeded",
                        now,
                    )
                    .await?);
            }
            let Some(session_id) = s(&["id"]) else {
                return Ok(ledger.record_event(id, ty, "no session id", now).await?);
            };
            if ledger.event_seen(id).await? {
                return Ok(Applied::Duplicate);
            }
            let session_key = s(&["metadata", "session_key"]);
            let Some((plan, pack, grant)) = what_was_bought(
                shared,
                config,
                billing,
                &session_id,
                session_key.as_deref(),
                obj,
            )
            .await?
            else {
                return Ok(ledger
                    .record_event(
                        id,
                        ty,
                        "no plan or credit pack of ours in this session: nothing granted",
                        now,
                    )
                    .await?);
            };
            let paid = CheckoutPaid {
                event_id: id.to_owned(),
                event_type: ty.to_owned(),
                session_id,
                client_reference_id: s(&["client_reference_id"]),
                session_key,
                payer_email: s(&["customer_details", "email"])
                    .or_else(|| s(&["customer_email"]))
                    .map(|e| e.trim().to_lowercase()),
                plan,
                credits_pack: pack,
                grant,
                amount: int_at(obj, &["amount_total"]),
                currency: s(&["currency"]),
                customer: s(&["customer"]),
                subscription: s(&["subscription"]),
                payment_intent: s(&["payment_intent"]),
                invoice: s(&["invoice"]),
                anonymous_id: format!("usr_{}", crate::accounts::random_id(16)?),
            };
            Ok(ledger.apply_checkout(&paid, now).await?)
        }
        "invoice.paid" => {
            let reason = s(&["billing_reason"]).unwrap_or_default();
            if let ("subscription_create", Some(invoice)) = (reason.as_str(), s(&["id"])) {
                let intent = s(&["payment_intent"]);
                return Ok(ledger
                    .record_first_invoice(id, &invoice, intent.as_deref(), now)
                    .await?);
            }
            if reason != "subscription_cycle" {
                let why = format!("invoice ({reason}): nothing to grant (a first invoice is granted by its checkout)");
                return Ok(ledger.record_event(id, ty, &why, now).await?);
            }
            let Some(invoice_id) = s(&["id"]) else {
                return Ok(ledger.record_event(id, ty, "no invoice id", now).await?);
            };
            let lines = &obj["lines"];
            let r = Renewal {
                event_id: id.to_owned(),
                invoice_id,
                customer: s(&["customer"]),
                subscription: invoice_subscription(obj).map(str::to_owned),
                plan: plan_of(config, &price_ids(lines)),
                amount: int_at(obj, &["amount_paid"]),
                currency: s(&["currency"]),
                payment_intent: s(&["payment_intent"]),
                renews_at: lines["data"][0]["period"]["end"].as_i64().map(|t| t * 1000),
            };
            Ok(ledger
                .apply_renewal(&r, &config.plans.grants(), now)
                .await?)
        }
        "customer.subscription.updated" | "customer.subscription.deleted" => {
            let Some(sub) = s(&["id"]) else {
                return Ok(ledger
                    .record_event(id, ty, "no subscription id", now)
                    .await?);
            };
            let items = &obj["items"];
            let c = SubscriptionChange {
                event_id: id.to_owned(),
                event_type: ty.to_owned(),
                subscription: sub,
                customer: s(&["customer"]),
                status: s(&["status"]),
                plan: plan_of(config, &price_ids(items)),
                renews_at: int_at(obj, &["current_period_end"])
                    .or_else(|| items["data"][0]["current_period_end"].as_i64())
                    .map(|t| t * 1000),
                deleted: ty == "customer.subscription.deleted",
            };
            Ok(ledger.apply_subscription(&c, now).await?)
        }
        "charge.refunded" | "charge.dispute.created" => {
            let refund = ty == "charge.refunded";
            let c = Clawback {
                event_id: id.to_owned(),
                event_type: ty.to_owned(),
                kind: if refund { "refund" } else { "dispute" },
                payment_intent: s(&["payment_intent"]),
                invoice: s(&["invoice"]),
                amount: int_at(obj, &["amount"]),
                amount_refunded: if refund {
                    int_at(obj, &["amount_refunded"])
                } else {
                    None
                },
                currency: s(&["currency"]),
            };
            Ok(ledger.apply_clawback(&c, now).await?)
        }
        other => Ok(ledger
            .record_event(id, other, "not a type the gateway acts on", now)
            .await?),
    }
}

/// The first price that sells a plan.
fn plan_of(config: &Config, prices: &[String]) -> Option<String> {
    prices
        .iter()
        .find_map(|p| config.plans.by_price(p))
        .map(str::to_owned)
}

/// `(plan, credits_pack, µcr to grant)`: from our stored checkout, else `metadata.plan` or
/// `metadata.credits_pack`, else the session's line items read from Stripe (price → plan or
/// pack). `None` when none of these names something we sell.
async fn what_was_bought(
    shared: &Shared,
    config: &Config,
    billing: &Billing,
    session_id: &str,
    session_key: Option<&str>,
    obj: &Value,
) -> Result<Option<(Option<String>, Option<String>, i64)>, GatewayError> {
    let plans = &config.plans;
    let sold_plan = |p: &str| plans.get(p).filter(|x| x.stripe_price.is_some()).is_some();
    let plan_grant = |p: &str| plans.get(p).and_then(|x| x.grant).unwrap_or(0);
    let pack_grant = |k: &str| billing.credit_packs.get(k).map(|x| x.credits);
    let ledger = shared.ledger()?;
    if let Some(c) = ledger.checkout(session_id, session_key).await? {
        return Ok(match (c.plan, c.credits_pack) {
            (Some(p), _) => {
                if plans.get(&p).is_none() {
                    tracing::warn!(session = %session_id, plan = %p, "a paid checkout's plan is no longer configured: the plan is set with no grant");
                }
                let g = plan_grant(&p);
                Some((Some(p), None, g))
            }
            (None, Some(k)) => {
                let found = pack_grant(&k).map(|g| (None, Some(k.clone()), g));
                if found.is_none() {
                    tracing::warn!(session = %session_id, pack = %k, "a paid checkout's credit pack is no longer configured: nothing granted");
                }
                found
            }
            (None, None) => None,
        });
    }
    if let Some(p) = str_at(obj, &["metadata", "plan"]).filter(|p| sold_plan(p)) {
        return Ok(Some((Some(p.to_owned()), None, plan_grant(p))));
    }
    if let Some(k) = str_at(obj, &["metadata", "credits_pack"]) {
        if let Some(g) = pack_grant(k) {
            return Ok(Some((None, Some(k.to_owned()), g)));
        }
    }
    let path = format!("/v1/checkout/sessions/{session_id}/line_items");
    let items = match stripe_api::call(shared, billing, "GET", &path, None, None).await {
        Ok(v) => v,
        // Stripe does not know the session: nothing of ours was bought. Any other refusal (rate
        // limited, a rotated key) is ours to fix: 503, and Stripe delivers the event again.
        Err(e) if e.status == Some(404) => return Ok(None),
        Err(e) => {
            // An outage: a 5xx makes Stripe deliver the event again later.
            return Err(GatewayError::new(
                ErrorKind::ServiceUnavailable,
                format!("could not read the session's line items: {e}"),
            ));
        }
    };
    for price in price_ids(&items) {
        if let Some(p) = plans.by_price(&price) {
            return Ok(Some((Some(p.to_owned()), None, plan_grant(p))));
        }
        if let Some((k, pack)) = billing.pack_by_price(&price) {
            return Ok(Some((None, Some(k.to_owned()), pack.credits)));
        }
    }
    Ok(None)
}
