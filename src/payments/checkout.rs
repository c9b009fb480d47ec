//! `POST /api/v1/billing/checkout {plan}` or `{credits_pack}` (with `organization_id`: for an
//! organization, by its owner): a Stripe Checkout Session bound to the caller's account or the
//! organization's (`client_reference_id` = its id, a random `metadata[session_key]` stored with
//! the checkout), answered with its URL. Nothing is granted here: the webhook does that once
//! Stripe says the session is paid.

use crate::request::Session;
use serde_json::{json, Map, Value};
use tollgate_filters::stripe::form;
use tollgate_filters::{ErrorKind, GatewayError};

use super::{billing_config, stripe_api};
use crate::auth::caller::Caller;
use crate::config::plans::{FREE, GUEST};
use crate::config::{Billing, Plans};
use crate::ledger::orgs::Role;
use crate::ledger::payments::{Checkout, Subscription};
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond};
use crate::runtime::Shared;

/// What is being bought.
enum Item {
    Plan(String),
    Pack(String),
}

impl Item {
    /// The body's `plan` or `credits_pack`: exactly one of them.
    fn from_body(m: &Map<String, Value>) -> Result<Item, GatewayError> {
        match (
            body::opt_string(m, "plan")?,
            body::opt_string(m, "credits_pack")?,
        ) {
            (Some(p), None) => Ok(Item::Plan(p.to_owned())),
            (None, Some(k)) => Ok(Item::Pack(k.to_owned())),
            (Some(_), Some(_)) => Err(GatewayError::invalid(
                "body: send either plan or credits_pack, not both",
            )),
            (None, None) => Err(GatewayError::invalid("plan: is required")),
        }
    }

    /// The Stripe price that sells the item, and whether it recurs (a subscription); an item
    /// not sold online is refused by name.
    fn price(&self, plans: &Plans, billing: &Billing) -> Result<(String, bool), GatewayError> {
        match self {
            Item::Plan(p) if p == FREE || p == GUEST => Err(GatewayError::invalid(format!(
                "plan: `{p}` is not sold (every account starts on free)"
            ))),
            Item::Plan(p) if !plans.assignable(p) => Err(GatewayError::invalid(format!(
                "plan: unknown plan `{p}`; plans: {}",
                plans.assignable_names().join(", ")
            ))),
            Item::Plan(p) => plans.get(p).and_then(|x| Some((x.stripe_price.clone()?, x.recurring))).ok_or_else(|| {
                GatewayError::invalid(format!(
                    "plan: `{p}` is not sold online; it is set up by contract (ask the operator, who assigns it to your account)"
                ))
            }),
            Item::Pack(k) => match billing.credit_packs.get(k) {
                Some(pack) => Ok((pack.stripe_price.clone(), false)),
                None => {
                    let names: Vec<&str> = billing.credit_packs.keys().map(String::as_str).collect();
                    Err(GatewayError::invalid(format!(
                        "credits_pack: unknown pack `{k}`; packs: {}",
                        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                    )))
                }
            },
        }
    }

    /// `(plan, credits_pack)` as the session's metadata names them: one of the two.
    fn metadata(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Item::Plan(p) => (Some(p.as_str()), None),
            Item::Pack(k) => (None, Some(k.as_str())),
        }
    }
}

pub async fn checkout(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let caller_account = caller.account()?.to_owned();
    let rt = shared.runtime.load_full();
    let m = body::json_object(session, 16 * 1024, rt.config.timeouts.request_body).await?;
    let billing = billing_config(&rt.config)?;
    let item = Item::from_body(&m)?;
    let ledger = shared.ledger()?;
    // Buying for an organization: its owner only; the session names the organization's
    // account, which the webhook's first identity step finds.
    let account_id = match body::opt_string(&m, "organization_id")? {
        None => caller_account.clone(),
        Some(org) => {
            let role =
                crate::orgs::role_at_least(ledger, org, &caller_account, Role::Member).await?;
            if role != Role::Owner {
                return Err(GatewayError::new(
                    ErrorKind::Forbidden,
                    "only the organization's owner buys for it",
                ));
            }
            org.to_owned()
        }
    };
    let (price, recurring) = item.price(&rt.config.plans, billing)?;
    let account = ledger.account(&account_id).await?.ok_or_else(|| {
        GatewayError::new(ErrorKind::Authentication, "the account no longer exists")
    })?;
    // An organization has no e-mail of its own: Stripe's form is prefilled with its owner's.
    let email = match &account.email {
        Some(e) => Some(e.clone()),
        None => ledger.account(&caller_account).await?.and_then(|a| a.email),
    };
    let sub = ledger.subscription(&account_id).await?;
    if recurring {
        refuse_second_subscription(&sub)?;
    }
    let session_key = crate::accounts::random_id(24)?;
    let mode = if recurring { "subscription" } else { "payment" };
    let (plan_meta, pack_meta) = item.metadata();
    let mut fields: Vec<(&str, &str)> = vec![
        ("mode", mode),
        ("line_items[0][price]", &price),
        ("line_items[0][quantity]", "1"),
        ("client_reference_id", &account_id),
        ("metadata[session_key]", &session_key),
        ("success_url", &billing.success_url),
        ("cancel_url", &billing.cancel_url),
    ];
    if let Some(p) = plan_meta {
        fields.push(("metadata[plan]", p));
    }
    if let Some(k) = pack_meta {
        fields.push(("metadata[credits_pack]", k));
    }
    // Stripe takes either a known customer or an e-mail to prefill, not both.
    match (&sub.customer_id, &email) {
        (Some(c), _) => fields.push(("customer", c)),
        (None, Some(e)) => fields.push(("customer_email", e)),
        (None, None) => {}
    }
    let (id, url) = create_session(shared, billing, &fields, &session_key).await?;
    ledger
        .record_checkout(
            &Checkout {
                id: id.clone(),
                session_key,
                account_id: account_id.clone(),
                plan: plan_meta.map(str::to_owned),
                credits_pack: pack_meta.map(str::to_owned),
                mode: mode.to_owned(),
            },
            crate::clock::now_ms(),
        )
        .await?;
    let v = json!({
        "checkout_url": url,
        "session_id": id,
        // A pack leaves the plan as it is.
        "plan": plan_meta.unwrap_or(&account.plan),
        "credits_pack": pack_meta,
        "mode": mode,
    });
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// A second subscription would bill the customer twice: plan changes go through the portal.
fn refuse_second_subscription(sub: &Subscription) -> Result<(), GatewayError> {
    let active = matches!(
        sub.status.as_deref(),
        Some("active" | "trialing" | "past_due")
    );
    if active && sub.subscription_id.is_some() {
        return Err(GatewayError::invalid(
            "plan: this account already has an active subscription; change or cancel it in the billing portal (POST /api/v1/billing/portal)",
        ));
    }
    Ok(())
}

/// Creates the Checkout Session at Stripe, keyed for idempotency by this checkout's session
/// key: the session's id and URL.
async fn create_session(
    shared: &Shared,
    billing: &Billing,
    fields: &[(&str, &str)],
    session_key: &str,
) -> Result<(String, String), GatewayError> {
    let created = stripe_api::call(
        shared,
        billing,
        "POST",
        "/v1/checkout/sessions",
        Some(&form(fields)),
        Some(&format!("tollgate-checkout-{session_key}")),
    )
    .await
    .map_err(|e| GatewayError::new(ErrorKind::Upstream, format!("checkout failed: {e}")))?;
    let (Some(id), Some(url)) = (created["id"].as_str(), created["url"].as_str()) else {
        return Err(GatewayError::new(
            ErrorKind::Upstream,
            "checkout failed: Stripe's reply has no session id or url",
        ));
    };
    Ok((id.to_owned(), url.to_owned()))
}
