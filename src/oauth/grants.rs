//! The dashboard's list of an account's OAuth grants (`GET /api/v1/oauth/grants`: client,
//! key, resource, created, last used) and their revocation (`DELETE /api/v1/oauth/grants/{id}`),
//! which stops the grant's tokens at once here and within 5 s on every other instance.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::{ErrorKind, GatewayError};

use super::metadata::base;
use super::store;
use crate::auth::caller::Caller;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub async fn list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account = caller.account()?;
    let rows = store::list_grants(shared.ledger()?, account).await?;
    let base = base(shared);
    let data: Vec<_> = rows
        .iter()
        .map(|g| {
            json!({
                "id": g.id,
                "client_name": g.client_name,
                "key_id": g.key_id,
                "key_name": g.key_name,
                "resource": format!("{base}{}", g.resource),
                "created_at": g.created_at / 1000,
                "last_used_at": g.last_used_at.map(|t| t / 1000),
            })
        })
        .collect();
    let body = json!({"object": "list", "data": data});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

pub async fn revoke(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let account = caller.account()?;
    let now = crate::clock::now_ms();
    if !store::revoke_grant(shared.ledger()?, id, Some(account), now).await? {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no live OAuth grant `{id}` on this account"),
        ));
    }
    shared.oauth_tokens.evict_grant(id);
    respond::json(session, ctx, 200, &json!({"id": id, "revoked": true}), &[]).await;
    Ok(())
}
