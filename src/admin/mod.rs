//! The admin API (`/api/v1/admin/*`): an account's view, credit adjustments and plan. The
//! route table admits only the admin token (`proxy::caller::admin`). Credit changes are
//! ledger entries, never silent updates.

use pingora::proxy::Session;
use serde_json::json;
use tollgate_filters::credits::from_credits;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::accounts::account_json;
use crate::proxy::body;
use crate::proxy::ctx::RequestCtx;
use crate::proxy::respond;
use crate::runtime::Shared;

/// `GET accounts/{id}`: balance (this instance's lease included), plan, limits and usage.
pub async fn account(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    id: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let round = shared.leases.flush(ledger, id).await?;
    let mut a = ledger.account(id).await?.ok_or_else(|| no_account(id))?;
    a.balance += shared.leases.available(id);
    let (rows, spent) = ledger.usage_totals(id).await?;
    drop(round);
    let mut v = account_json(&a);
    v["requests_per_hour"] = a.requests_per_hour.into();
    v["requests_per_day"] = a.requests_per_day.into();
    v["usage_rows"] = rows.into();
    v["credits_spent"] = tollgate_filters::credits::to_credits(spent).into();
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `POST accounts/{id}/credits {delta, reason}`: an adjustment; never below zero.
pub async fn credits(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    id: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let m = body::json_object(
        session,
        16 * 1024,
        shared.runtime.load().config.timeouts.request_body,
    )
    .await?;
    let delta = match m.get("delta").and_then(|d| d.as_f64()) {
        Some(d) => from_credits(d)
            .filter(|d| *d != 0)
            .ok_or_else(|| GatewayError::invalid("delta: must be a non-zero number of credits"))?,
        None => {
            return Err(GatewayError::invalid(
                "delta: is required and must be a number",
            ))
        }
    };
    let reason = body::string(&m, "reason")?.trim();
    if reason.is_empty() || reason.len() > 500 {
        return Err(GatewayError::invalid("reason: must be 1 to 500 characters"));
    }
    // A debit may need the credits this instance leases: return them first.
    let _round = shared.leases.release(ledger, id).await?;
    let Some(balance) = ledger
        .adjust_credits(id, delta, reason, "admin", crate::clock::now_ms())
        .await?
    else {
        return match ledger.account(id).await? {
            None => Err(no_account(id)),
            Some(_) => Err(GatewayError::invalid(
                "delta: would take the balance below zero",
            )),
        };
    };
    let v = json!({"user_id": id, "credits": tollgate_filters::credits::to_credits(balance)});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `PUT accounts/{id}/plan {plan, requests_per_hour?, requests_per_day?}`.
pub async fn plan(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    id: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let m = body::json_object(
        session,
        16 * 1024,
        shared.runtime.load().config.timeouts.request_body,
    )
    .await?;
    let plan = body::string(&m, "plan")?;
    let rt = shared.runtime.load();
    let plans = &rt.config.plans;
    if !plans.assignable(plan) {
        return Err(GatewayError::invalid(format!(
            "plan: must be one of {}",
            plans.assignable_names().join(", ")
        )));
    }
    let per_hour = body::opt_positive(&m, "requests_per_hour")?;
    let per_day = body::opt_positive(&m, "requests_per_day")?;
    if !ledger.set_plan(id, plan, per_hour, per_day).await? {
        return Err(no_account(id));
    }
    let a = ledger.account(id).await?.ok_or_else(|| no_account(id))?;
    let mut v = account_json(&a);
    v["requests_per_hour"] = a.requests_per_hour.into();
    v["requests_per_day"] = a.requests_per_day.into();
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

fn no_account(id: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, format!("no account `{id}`"))
}
