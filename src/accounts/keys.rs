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
                   "last_used_at": k.last_used_at.map(|t| t / 1000), "revoked": k.revoked,
                   "expires_at": k.expires_at.map(|t| t / 1000), "allowed_models": k.allowed_models})
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
    let now = crate::clock::now_ms();
    let expires_at = expiry(&m, now)?.flatten();
    let models = allowed_models(shared, &m)?.flatten();
    let (secret, key) = new_key(name)?;
    let stored = models.as_ref().map(|l| json!(l).to_string());
    ledger
        .insert_key_with(&account_id, &key, now, expires_at, stored.as_deref())
        .await?;
    let v = json!({"id": key.id, "name": key.name, "prefix": key.prefix, "created_at": now / 1000,
                   "expires_at": expires_at.map(|t| t / 1000), "allowed_models": models, "key": secret});
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}

/// `expires_at` of a key's settings: absent (`None`), `null` (`Some(None)`: never), or Unix
/// seconds in the future (returned in milliseconds).
fn expiry(
    m: &serde_json::Map<String, serde_json::Value>,
    now_ms: i64,
) -> Result<Option<Option<i64>>, GatewayError> {
    match m.get("expires_at") {
        None => Ok(None),
        Some(serde_json::Value::Null) => Ok(Some(None)),
        Some(v) => match v.as_i64() {
            Some(s) if s.saturating_mul(1000) > now_ms => Ok(Some(Some(s.saturating_mul(1000)))),
            Some(_) => Err(GatewayError::invalid(
                "expires_at: must be in the future (Unix seconds)",
            )),
            None => Err(GatewayError::invalid(
                "expires_at: must be Unix seconds, or null for never",
            )),
        },
    }
}

/// `allowed_models` of a key's settings: absent (`None`), `null` (`Some(None)`: every model), or
/// a non-empty array of ids, aliases or tiers the catalog knows.
fn allowed_models(
    shared: &Shared,
    m: &serde_json::Map<String, serde_json::Value>,
) -> Result<Option<Option<Vec<String>>>, GatewayError> {
    let list = match m.get("allowed_models") {
        None => return Ok(None),
        Some(serde_json::Value::Null) => return Ok(Some(None)),
        Some(serde_json::Value::Array(a)) if !a.is_empty() && a.len() <= 256 => a,
        Some(_) => {
            return Err(GatewayError::invalid(
                "allowed_models: must be a non-empty array of model ids, aliases or tiers, or null for every model",
            ))
        }
    };
    let mut names = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        match v.as_str() {
            Some(s) if !s.is_empty() => names.push(s.to_owned()),
            _ => {
                return Err(GatewayError::invalid(format!(
                    "allowed_models[{i}]: must be a model name"
                )))
            }
        }
    }
    let rt = shared.runtime.load();
    if let Err(i) =
        crate::auth::allowlist::allowed(&rt.config.catalog, &names, crate::clock::now_secs())
    {
        return Err(GatewayError::invalid(format!(
            "allowed_models[{i}]: no model, alias or tier `{}`",
            names[i]
        )));
    }
    Ok(Some(Some(names)))
}

/// `PATCH /api/v1/keys/{id}`: a key's settings (`expires_at`, `allowed_models`); the change
/// holds on every instance within the key cache's lifetime, and expiry itself is checked on
/// each request.
pub async fn update_key(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    key_id: &str,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let m = body::json_object(
        session,
        MAX_ACCOUNT_BODY,
        shared.runtime.load().config.timeouts.request_body,
    )
    .await?;
    if let Some(k) = m
        .keys()
        .find(|k| !matches!(k.as_str(), "expires_at" | "allowed_models"))
    {
        return Err(GatewayError::invalid(format!(
            "{k}: not a setting of a key (expires_at, allowed_models)"
        )));
    }
    // Both checked before either is written: a bad one changes nothing.
    let expires_at = expiry(&m, crate::clock::now_ms())?;
    let models = allowed_models(shared, &m)?;
    if expires_at.is_none() && models.is_none() {
        return Err(GatewayError::invalid("body: no setting to change"));
    }
    let ledger = shared.ledger()?;
    let missing = || {
        GatewayError::new(
            ErrorKind::NotFound,
            format!("no key `{key_id}` on this account"),
        )
    };
    let mut v = json!({ "id": key_id });
    if let Some(at) = expires_at {
        let hash = ledger
            .set_key_expiry(account_id, key_id, at)
            .await?
            .ok_or_else(missing)?;
        shared.keys.evict(&hash);
        v["expires_at"] = json!(at.map(|t| t / 1000));
    }
    if let Some(list) = &models {
        let stored = list.as_ref().map(|l| json!(l).to_string());
        let hash = ledger
            .set_key_models(account_id, key_id, stored.as_deref())
            .await?
            .ok_or_else(missing)?;
        shared.keys.evict(&hash);
        v["allowed_models"] = json!(list);
    }
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `POST /api/v1/keys/{id}/rotate {grace_seconds?}`: a successor with the same name, expiry and
/// allowlist (shown once); the old key keeps working for the grace period (default 24 h, 0:
/// stops now), then stops on every instance (its expiry, checked on each request).
pub async fn rotate_key(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    key_id: &str,
) -> Result<(), GatewayError> {
    const DEFAULT_GRACE: i64 = 24 * 3600;
    const MAX_GRACE: i64 = 30 * 24 * 3600;
    let account_id = caller.account()?;
    let m = body::json_object(
        session,
        MAX_ACCOUNT_BODY,
        shared.runtime.load().config.timeouts.request_body,
    )
    .await?;
    let grace = match m.get("grace_seconds") {
        None | Some(serde_json::Value::Null) => DEFAULT_GRACE,
        Some(v) => match v.as_i64() {
            Some(g) if (0..=MAX_GRACE).contains(&g) => g,
            _ => {
                return Err(GatewayError::invalid(
                    "grace_seconds: must be an integer from 0 to 2592000 (30 days)",
                ))
            }
        },
    };
    let (secret, key) = new_key("rotated")?;
    let now = crate::clock::now_ms();
    let Some((old_hash, old_until, row)) = shared
        .ledger()?
        .rotate_key(account_id, key_id, &key, now, now + grace * 1000)
        .await?
    else {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no live key `{key_id}` on this account"),
        ));
    };
    shared.keys.evict(&old_hash);
    let v = json!({"id": row.id, "name": row.name, "prefix": row.prefix, "created_at": now / 1000,
                   "expires_at": row.expires_at.map(|t| t / 1000), "allowed_models": row.allowed_models,
                   "key": secret, "replaces": {"id": key_id, "expires_at": old_until / 1000}});
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
