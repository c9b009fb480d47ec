//! Payments no account could be found for (identity step d) land on anonymous accounts. Only
//! the operator moves one to a real account: a later sign-up with the payer's e-mail does not
//! claim it, because an e-mail address at sign-up is not verified here, and whoever registered
//! a payer's address first would otherwise take their plan and credits.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::credits::to_credits;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::ledger::payments::Assigned;
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond};
use crate::runtime::Shared;

/// `GET /api/v1/admin/billing/unclaimed`.
pub async fn list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let rows: Vec<_> = shared
        .ledger()?
        .unclaimed()
        .await?
        .into_iter()
        .map(|u| {
            json!({"id": u.user_id, "payer_email": u.payer_email, "plan": u.plan,
                   "credits": to_credits(u.balance), "created_at": u.created_at / 1000})
        })
        .collect();
    respond::json(session, ctx, 200, &json!({"data": rows}), &[]).await;
    Ok(())
}

/// `POST /api/v1/admin/billing/unclaimed/{id}/assign {user_id}`.
pub async fn assign(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    id: &str,
) -> Result<(), GatewayError> {
    let deadline = shared.runtime.load().config.timeouts.request_body;
    let m = body::json_object(session, 16 * 1024, deadline).await?;
    let target = body::string(&m, "user_id")?.to_owned();
    let ledger = shared.ledger()?;
    match ledger
        .assign_unclaimed(id, &target, crate::clock::now_ms())
        .await?
    {
        Assigned::Moved { credits, plan } => {
            shared.keys.evict_account(&target);
            let v = json!({"id": id, "assigned_to": target, "credits": to_credits(credits), "plan": plan});
            respond::json(session, ctx, 200, &v, &[]).await;
            Ok(())
        }
        Assigned::NoSuchAnonymous => Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no unclaimed anonymous account `{id}`"),
        )),
        Assigned::NoSuchTarget => Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("user_id: no account `{target}` to assign to"),
        )),
    }
}
