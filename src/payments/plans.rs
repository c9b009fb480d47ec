//! `GET /api/v1/plans` (public): the plans with their limits, credits and price, and the
//! credit packs, from the config: what the pricing page shows and `checkout` sells.

use crate::request::Session;
use serde_json::{json, Value};
use tollgate_filters::credits::to_credits;
use tollgate_filters::GatewayError;

use crate::config::plans::{FREE, GUEST};
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub async fn plans(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let config = &rt.config;
    let selling = config.billing.is_some();
    let mut names = vec![GUEST];
    names.extend(config.plans.assignable_names());
    let plans: Vec<Value> = names
        .into_iter()
        .map(|name| {
            let limits = config.plans.limits(name);
            let p = config.plans.get(name);
            let grant = match name {
                FREE => Some(config.plans.signup_grant()),
                _ => p.and_then(|p| p.grant),
            };
            json!({
                "name": name,
                "requests_per_hour": limits.per_hour,
                "requests_per_day": limits.per_day,
                "grant_credits": grant.map(to_credits),
                "price_label": p.and_then(|p| p.price_label.clone()),
                "purchasable": selling && p.is_some_and(|p| p.stripe_price.is_some()),
                "recurring": p.is_none_or(|p| p.recurring),
            })
        })
        .collect();
    let packs: Vec<Value> = config
        .billing
        .iter()
        .flat_map(|b| b.credit_packs.iter())
        .map(|(name, p)| json!({"name": name, "credits": to_credits(p.credits), "price_label": p.price_label}))
        .collect();
    let v = json!({"plans": plans, "credit_packs": packs, "billing": selling});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}
