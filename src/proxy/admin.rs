//! The admin API (`/api/v1/admin/*`), authorised by the token in `server.admin_token_env`,
//! compared in constant time. Credit changes are ledger entries, never silent updates.

use pingora::proxy::Session;
use serde_json::json;
use tollgate_filters::credits::from_credits;
use tollgate_filters::keys::constant_time_eq;
use tollgate_filters::{ErrorKind, GatewayError};

use super::account::account_json;
use super::{body, respond, Gateway, RequestCtx};

const KNOWN_PLANS: &[&str] = &["free", "pro", "smb", "business"];

fn authorise(gw: &Gateway, session: &Session) -> Result<(), GatewayError> {
    let Some(token) = gw.shared.admin_token.as_deref() else {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "the admin API is disabled: no admin token is configured",
        ));
    };
    let presented = session
        .req_header()
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err(GatewayError::new(
            ErrorKind::Authentication,
            "invalid admin token",
        ))
    }
}

pub async fn handle(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    method: &str,
    rest: &str,
) -> Result<(), GatewayError> {
    authorise(gw, session)?;
    let ledger = gw.ledger()?;
    let parts: Vec<&str> = rest.split('/').collect();
    match (method, parts.as_slice()) {
        ("GET", ["accounts", id]) => {
            let round = gw.shared.leases.flush(ledger, id).await?;
            let mut a = ledger.account(id).await?.ok_or_else(|| no_account(id))?;
            a.balance += gw.shared.leases.available(id);
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
        ("POST", ["accounts", id, "credits"]) => {
            let m = body::json_object(session, 16 * 1024).await?;
            let delta = match m.get("delta").and_then(|d| d.as_f64()) {
                Some(d) => from_credits(d).filter(|d| *d != 0).ok_or_else(|| {
                    GatewayError::invalid("delta: must be a non-zero number of credits")
                })?,
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
            let _round = gw.shared.leases.release(ledger, id).await?;
            let Some(balance) = ledger
                .adjust_credits(id, delta, reason, "admin", crate::now_ms())
                .await?
            else {
                return match ledger.account(id).await? {
                    None => Err(no_account(id)),
                    Some(_) => Err(GatewayError::invalid(
                        "delta: would take the balance below zero",
                    )),
                };
            };
            let v =
                json!({"user_id": id, "credits": tollgate_filters::credits::to_credits(balance)});
            respond::json(session, ctx, 200, &v, &[]).await;
            Ok(())
        }
        ("PUT", ["accounts", id, "plan"]) => {
            let m = body::json_object(session, 16 * 1024).await?;
            let plan = body::string(&m, "plan")?;
            if !KNOWN_PLANS.contains(&plan) {
                return Err(GatewayError::invalid(format!(
                    "plan: must be one of {}",
                    KNOWN_PLANS.join(", ")
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
        _ => Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no admin route for {method} /api/v1/admin/{rest}"),
        )),
    }
}

fn no_account(id: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, format!("no account `{id}`"))
}
