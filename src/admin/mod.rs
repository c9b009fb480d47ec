//! The admin API (`/api/v1/admin/*`): an account's view (by id, or found by e-mail), credit
//! adjustments and plan. The route table admits only the admin token or an operator's session
//! (`auth::caller::admin`). Credit changes are
//! ledger entries, never silent updates.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::credits::from_credits;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::accounts::account_json;
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// `GET accounts/{id}`: balance (what every lease has not spent included), plan, limits and
/// usage.
pub async fn account(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    id: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let round = shared.leases.flush(ledger, id).await?;
    // What was spent is read first: another instance's lease round between these reads moves
    // money from its lease to the usage rows, and read in this order it can only make the
    // balance shown smaller than initial − spent, never larger (read the other way, a round in
    // between counted its money twice).
    let (rows, spent) = ledger.usage_totals(id).await?;
    let mut a = ledger.account(id).await?.ok_or_else(|| no_account(id))?;
    let (balance, leased) = ledger
        .balance_and_leased(id)
        .await?
        .ok_or_else(|| no_account(id))?;
    a.balance = balance + leased;
    drop(round);
    let mut v = account_json(&a);
    v["requests_per_hour"] = a.requests_per_hour.into();
    v["requests_per_day"] = a.requests_per_day.into();
    v["usage_rows"] = rows.into();
    v["credits_spent"] = tollgate_filters::credits::to_credits(spent).into();
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `GET accounts?q=<e-mail or user id>`: the account as `GET accounts/{id}` shows it.
pub async fn find(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let q = session
        .req_header()
        .uri
        .query()
        .unwrap_or("")
        .split('&')
        .find_map(|p| p.strip_prefix("q="))
        .map(percent_decode)
        .unwrap_or_default();
    let q = q.trim();
    if q.is_empty() {
        return Err(GatewayError::invalid(
            "q: give an e-mail address or a user id",
        ));
    }
    let id = if q.contains('@') {
        let found = shared.ledger()?.login_lookup(&q.to_lowercase()).await?;
        found.map(|(id, _)| id).ok_or_else(|| no_account(q))?
    } else {
        q.to_owned()
    };
    account(shared, session, ctx, &id).await
}

/// `%XX` and `+` in a query value.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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

#[cfg(test)]
mod tests {
    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(super::percent_decode("a%40b.io"), "a@b.io");
        assert_eq!(super::percent_decode("x+y%2"), "x y%2");
        assert_eq!(super::percent_decode("%zz"), "%zz");
    }
}
