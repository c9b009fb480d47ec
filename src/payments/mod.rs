//! Plans and credit packs sold through Stripe Checkout (DESIGN.md, Rules: Payments):
//! [`checkout`] creates the session bound to the caller, [`webhook`] applies Stripe's signed
//! events exactly once to the right account (the ledger's `payment_events`), [`history`] and
//! [`portal`] are the account's view, [`unclaimed`] the operator's handling of payments no
//! account could be found for.

pub mod checkout;
pub mod plans;
pub mod stripe_api;
pub mod unclaimed;
pub mod webhook;

use crate::request::Session;
use serde_json::json;
use tollgate_filters::credits::to_credits;
use tollgate_filters::stripe::form;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::config::{Billing, Config};
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// The `[billing]` section, or 503 when this gateway sells nothing.
pub fn billing_config(config: &Config) -> Result<&Billing, GatewayError> {
    config.billing.as_ref().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::ServiceUnavailable,
            "billing is not configured on this gateway (no [billing] section)",
        )
    })
}

/// `GET /api/v1/billing`: the plan, the subscription and the payments, newest first.
pub async fn history(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let ledger = shared.ledger()?;
    let account = ledger.account(account_id).await?.ok_or_else(|| {
        GatewayError::new(ErrorKind::Authentication, "the account no longer exists")
    })?;
    let sub = ledger.subscription(account_id).await?;
    let payments: Vec<_> = ledger
        .payments(account_id)
        .await?
        .into_iter()
        .map(|p| {
            json!({
                "created_at": p.created_at / 1000,
                "kind": p.kind,
                "plan": p.plan,
                "credits_pack": p.credits_pack,
                "credits": to_credits(p.credits),
                "amount": p.amount,
                "currency": p.currency,
                "event_id": p.event_id,
                "reference": p.source,
            })
        })
        .collect();
    let v = json!({
        "plan": account.plan,
        "subscription": sub.subscription_id.as_ref().map(|id| json!({
            "id": id,
            "status": sub.status,
            "renews_at": sub.renews_at.map(|t| t / 1000),
        })),
        "customer": sub.customer_id.is_some(),
        "payments": payments,
    });
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `POST /api/v1/billing/portal`: a Stripe Billing Portal session (cancel, change card).
pub async fn portal(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let rt = shared.runtime.load_full();
    let billing = billing_config(&rt.config)?;
    let sub = shared.ledger()?.subscription(account_id).await?;
    let Some(customer) = sub.customer_id else {
        return Err(GatewayError::invalid(
            "this account has no Stripe customer yet: buy a plan or a credit pack first",
        ));
    };
    let made = stripe_api::call(
        shared,
        billing,
        "POST",
        "/v1/billing_portal/sessions",
        Some(&form(&[
            ("customer", &customer),
            ("return_url", &billing.cancel_url),
        ])),
        None,
    )
    .await
    .map_err(|e| GatewayError::new(ErrorKind::Upstream, format!("billing portal: {e}")))?;
    let Some(url) = made["url"].as_str() else {
        return Err(GatewayError::new(
            ErrorKind::Upstream,
            "billing portal: Stripe's reply has no url",
        ));
    };
    respond::json(session, ctx, 200, &json!({"portal_url": url}), &[]).await;
    Ok(())
}
