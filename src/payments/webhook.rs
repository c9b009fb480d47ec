//! `POST /api/v1/billing/webhook`: Stripe's events, signed. The signature is checked over the
//! raw body before anything is parsed (400 and nothing applied on any failure); each event is
//! then applied by the ledger in one transaction with its record, so a redelivery or a
//! concurrent delivery to another instance changes nothing. Every answer after the signature
//! check is 200 (recorded) unless the store or Stripe itself failed, when a 5xx makes Stripe
//! deliver again later.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::stripe::{self, price_ids, secrets, verify, Action, Event, TOLERANCE_SECS};
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
    let event = Event::parse(&raw).map_err(|e| GatewayError::invalid(format!("body: {e}")))?;
    let (id, ty) = (event.id.as_str(), event.type_name.as_str());
    let applied = apply(shared, &rt.config, billing, &event).await?;
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
        shared.webhooks.payment_applied(a, id);
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
    event: &Event,
) -> Result<Applied, GatewayError> {
    let ledger = shared.ledger()?;
    let now = crate::clock::now_ms();
    let (id, ty) = (event.id.as_str(), event.type_name.as_str());
    // Recorded with why nothing was granted: a redelivery is then a duplicate.
    macro_rules! record {
        ($why:expr $(,)?) => {
            ledger.record_event(id, ty, $why, now)
        };
    }
    match &event.action {
        Action::CheckoutAwaitingPayment => {
            Ok(record!("unpaid: waiting for checkout.session.async_payment_succeeded",).await?)
        }
        Action::CheckoutPaid(c) => {
            if ledger.event_seen(id).await? {
                return Ok(Applied::Duplicate);
            }
            let Some(bought) = what_was_bought(shared, config, billing, c).await? else {
                return Ok(record!(
                    "no plan or credit pack of ours in this session: nothing granted"
                )
                .await?);
            };
            let paid = checkout_paid(event, c, bought)?;
            Ok(ledger.apply_checkout(&paid, now).await?)
        }
        Action::FirstInvoicePaid {
            invoice,
            payment_intent,
        } => Ok(ledger
            .record_first_invoice(id, invoice, payment_intent.as_deref(), now)
            .await?),
        Action::OtherInvoicePaid { reason } => {
            let why = format!(
                "invoice ({reason}): nothing to grant (a first invoice is granted by its checkout)"
            );
            Ok(record!(&why).await?)
        }
        Action::RenewalPaid(r) => Ok(ledger
            .apply_renewal(&renewal(event, config, r), &config.plans.grants(), now)
            .await?),
        Action::SubscriptionChanged(sub) => Ok(ledger
            .apply_subscription(&subscription_change(event, config, sub), now)
            .await?),
        Action::Clawback(cb) => Ok(ledger.apply_clawback(&clawback(event, cb), now).await?),
        Action::Incomplete(why) => Ok(record!(why).await?),
        Action::Ignored => Ok(record!("not a type the gateway acts on").await?),
    }
}

/// A paid checkout as the ledger applies it: what was bought, and a fresh anonymous account
/// id for when the session matches no account.
fn checkout_paid(
    event: &Event,
    c: &stripe::Checkout,
    (plan, credits_pack, grant): Bought,
) -> Result<CheckoutPaid, GatewayError> {
    Ok(CheckoutPaid {
        event_id: event.id.clone(),
        event_type: event.type_name.clone(),
        session_id: c.session_id.clone(),
        client_reference_id: c.client_reference_id.clone(),
        session_key: c.session_key.clone(),
        payer_email: c.payer_email.clone(),
        plan,
        credits_pack,
        grant,
        amount: c.amount,
        currency: c.currency.clone(),
        customer: c.customer.clone(),
        subscription: c.subscription.clone(),
        payment_intent: c.payment_intent.clone(),
        invoice: c.invoice.clone(),
        anonymous_id: format!("usr_{}", crate::auth::random_id(16)?),
    })
}

/// A paid renewal invoice as the ledger applies it, its plan read from its prices.
fn renewal(event: &Event, config: &Config, r: &stripe::Renewal) -> Renewal {
    Renewal {
        event_id: event.id.clone(),
        invoice_id: r.invoice.clone(),
        customer: r.customer.clone(),
        subscription: r.subscription.clone(),
        plan: plan_of(config, &r.price_ids),
        amount: r.amount,
        currency: r.currency.clone(),
        payment_intent: r.payment_intent.clone(),
        renews_at: r.renews_at_ms,
    }
}

/// A subscription's change as the ledger applies it, its plan read from its prices.
fn subscription_change(
    event: &Event,
    config: &Config,
    sub: &stripe::Subscription,
) -> SubscriptionChange {
    SubscriptionChange {
        event_id: event.id.clone(),
        event_type: event.type_name.clone(),
        subscription: sub.id.clone(),
        customer: sub.customer.clone(),
        status: sub.status.clone(),
        plan: plan_of(config, &sub.price_ids),
        renews_at: sub.renews_at_ms,
        deleted: sub.deleted,
    }
}

/// A refund or dispute as the ledger applies it.
fn clawback(event: &Event, cb: &stripe::Clawback) -> Clawback {
    Clawback {
        event_id: event.id.clone(),
        event_type: event.type_name.clone(),
        kind: cb.kind.as_str(),
        payment_intent: cb.payment_intent.clone(),
        invoice: cb.invoice.clone(),
        amount: cb.amount,
        amount_refunded: cb.amount_refunded,
        currency: cb.currency.clone(),
    }
}

/// The first price that sells a plan.
fn plan_of(config: &Config, prices: &[String]) -> Option<String> {
    prices
        .iter()
        .find_map(|p| config.plans.by_price(p))
        .map(str::to_owned)
}

/// What a paid checkout bought: `(plan, credits_pack, µcr to grant)`.
type Bought = (Option<String>, Option<String>, i64);

/// What the session bought: from our stored checkout, else `metadata.plan` or
/// `metadata.credits_pack`, else the session's line items read from Stripe (price → plan or
/// pack). `None` when none of these names something we sell.
async fn what_was_bought(
    shared: &Shared,
    config: &Config,
    billing: &Billing,
    bought: &stripe::Checkout,
) -> Result<Option<Bought>, GatewayError> {
    let session_id = bought.session_id.as_str();
    let session_key = bought.session_key.as_deref();
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
    if let Some(p) = bought.metadata_plan.as_deref().filter(|p| sold_plan(p)) {
        return Ok(Some((Some(p.to_owned()), None, plan_grant(p))));
    }
    if let Some(k) = bought.metadata_credits_pack.as_deref() {
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
