//! API keys: issued (shown once), listed and revoked (`/api/v1/keys*`). Only a hash is stored.

use pingora::proxy::Session;
use serde_json::json;
use tollgate_filters::{keys, ErrorKind, GatewayError};

use super::{random_bytes, random_id, MAX_ACCOUNT_BODY};
use crate::auth::caller::Caller;
use crate::ledger::NewKey;
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// A fresh key: the secret (shown once) and what is stored.
pub fn new_key(name: &str) -> Result<(String, NewKey), GatewayError> {
    let secret = keys::format_key(random_bytes(96))
        .ok_or_else(|| GatewayError::internal("could not generate a key"))?;
    let id = format!("key_{}", random_id(16)?);
    Ok((
        secret.clone(),
        NewKey {
            id,
            name: name.to_owned(),
            prefix: keys::display_prefix(&secret),
            hash: keys::hash(&secret),
        },
    ))
}

pub async fn list_keys(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let keys = shared.ledger()?.list_keys(account_id).await?;
    let data: Vec<_> = keys
        .iter()
        .map(|k| {
            json!({"id": k.id, "name": k.name, "prefix": k.prefix, "created_at": k.created_at / 1000,
                   "last_used_at": k.last_used_at.map(|t| t / 1000), "revoked": k.revoked})
        })
        .collect();
    respond::json(
        session,
        ctx,
        200,
        &json!({"object": "list", "data": data}),
        &[],
    )
    .await;
    Ok(())
}

pub async fn create_key(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?.to_owned();
    let ledger = shared.ledger()?;
    let m = body::json_object(
        session,
        MAX_ACCOUNT_BODY,
        shared.runtime.load().config.timeouts.request_body,
    )
    .await?;
    let name = body::opt_string(&m, "name")?.unwrap_or("unnamed").trim();
    if name.is_empty() || name.len() > 100 {
        return Err(GatewayError::invalid("name: must be 1 to 100 characters"));
    }
    let (secret, key) = new_key(name)?;
    let now = crate::clock::now_ms();
    ledger.insert_key(&account_id, &key, now).await?;
    let v = json!({"id": key.id, "name": key.name, "prefix": key.prefix, "created_at": now / 1000, "key": secret});
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}

pub async fn revoke_key(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    key_id: &str,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let Some(hash) = shared
        .ledger()?
        .revoke_key(account_id, key_id, crate::clock::now_ms())
        .await?
    else {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no key `{key_id}` on this account"),
        ));
    };
    shared.keys.evict(&hash);
    respond::json(
        session,
        ctx,
        200,
        &json!({"id": key_id, "revoked": true}),
        &[],
    )
    .await;
    Ok(())
}
