//! API keys: issued (shown once), listed and revoked (`/api/v1/keys*`). Only a hash is stored.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::{keys, ErrorKind, GatewayError};

use super::{key_settings, random_bytes, random_id, MAX_ACCOUNT_BODY};
use crate::auth::caller::Caller;
use crate::ledger::orgs::Role;
use crate::ledger::{KeyRow, Ledger, NewKey};
use crate::limits::budgets;
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
    let ledger = shared.ledger()?;
    // This instance's metered rows first, so that what a key spent includes them.
    drop(shared.leases.flush(ledger, account_id).await?);
    let keys = ledger.list_keys(account_id).await?;
    let now = crate::clock::now_ms();
    let mut data = Vec::with_capacity(keys.len());
    for k in &keys {
        let spent = spent(shared, k, now).await;
        data.push(key_settings::show(k, spent, now));
    }
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

/// What a key spent in its budget's period (from the budget counters, which every instance
/// shares), or in its lifetime without a budget; `None` when the stores cannot say.
async fn spent(shared: &Shared, k: &KeyRow, now: i64) -> Option<i64> {
    let ledger = shared.ledger().ok()?;
    let read = match k.limits.budget {
        Some((_, period)) => shared
            .limiter
            .budgets
            .spent(
                &shared.limiter.counters(),
                ledger,
                budgets::Of::Key(&k.id),
                period,
                now,
            )
            .await
            .map_err(|e| e.0),
        None => ledger.key_spent(&k.id, 0).await.map_err(|e| e.to_string()),
    };
    read.inspect_err(|e| tracing::warn!(key = %k.id, "could not read what the key spent: {e}"))
        .ok()
}

/// The body of a key's settings (`POST`, `PATCH`, rotation), as a JSON object.
async fn settings_body(
    shared: &Shared,
    session: &mut Session,
) -> Result<serde_json::Map<String, serde_json::Value>, GatewayError> {
    let timeout = shared.runtime.load().config.timeouts.request_body;
    body::json_object(session, MAX_ACCOUNT_BODY, timeout).await
}

/// One of the account's keys as stored (just written: read back, not rebuilt here).
async fn own_key(ledger: &Ledger, account_id: &str, key_id: &str) -> Result<KeyRow, GatewayError> {
    ledger
        .list_keys(account_id)
        .await?
        .into_iter()
        .find(|k| k.id == key_id)
        .ok_or_else(|| no_key(key_id))
}

fn no_key(key_id: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!("no key `{key_id}` on this account"),
    )
}

pub async fn create_key(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?.to_owned();
    let ledger = shared.ledger()?;
    if ledger.is_org(&account_id).await? {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            "an organization key cannot issue keys: use a personal key or the dashboard",
        ));
    }
    let mut m = settings_body(shared, session).await?;
    // An organization key spends from the organization's wallet and is owned by the member
    // who issues it.
    let org = match m.remove("organization_id") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(org)) => {
            crate::orgs::access(shared, session, caller, &org, Role::Member).await?;
            Some(org)
        }
        Some(_) => return Err(GatewayError::invalid("organization_id: must be a string")),
    };
    let name = body::opt_string(&m, "name")?.unwrap_or("unnamed").trim();
    if name.is_empty() || name.len() > 100 {
        return Err(GatewayError::invalid("name: must be 1 to 100 characters"));
    }
    let now = crate::clock::now_ms();
    let settings = key_settings::parse(shared, &m, now).await?;
    let (secret, key) = new_key(name)?;
    let (wallet, owner) = match &org {
        Some(org) => (org.as_str(), Some(account_id.as_str())),
        None => (account_id.as_str(), None),
    };
    ledger
        .insert_key_with(wallet, owner, &key, now, &settings)
        .await?;
    let row = own_key(ledger, &account_id, &key.id).await?;
    let mut v = key_settings::show(&row, Some(0), now);
    v["key"] = json!(secret);
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}

/// `PATCH /api/v1/keys/{id}`: a key's settings (expiry, allowlist, budget, limits); the
/// change holds on every instance within the key cache's lifetime, and expiry itself is
/// checked on each request.
pub async fn update_key(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    key_id: &str,
) -> Result<(), GatewayError> {
    let account_id = caller.account()?;
    let m = settings_body(shared, session).await?;
    if m.contains_key("name") {
        return Err(GatewayError::invalid(
            "name: a key's name is set when it is created",
        ));
    }
    let now = crate::clock::now_ms();
    let change = key_settings::parse(shared, &m, now).await?;
    if change.is_empty() {
        return Err(GatewayError::invalid("body: no setting to change"));
    }
    let ledger = shared.ledger()?;
    let Some(hash) = ledger.change_key(account_id, key_id, &change).await? else {
        return Err(no_key(key_id));
    };
    shared.keys.evict(&hash);
    let row = own_key(ledger, account_id, key_id).await?;
    let spent = spent(shared, &row, now).await;
    respond::json(
        session,
        ctx,
        200,
        &key_settings::show(&row, spent, now),
        &[],
    )
    .await;
    Ok(())
}

/// `POST /api/v1/keys/{id}/rotate {grace_seconds?}`: a successor with the same name and
/// settings (shown once; its budget starts from nothing spent); the old key keeps working for the grace period (default 24 h, 0:
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
    let m = settings_body(shared, session).await?;
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
        return Err(no_key(key_id));
    };
    shared.keys.evict(&old_hash);
    let mut v = key_settings::show(&row, Some(0), now);
    v["key"] = json!(secret);
    v["replaces"] = json!({"id": key_id, "expires_at": old_until / 1000});
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
        return Err(no_key(key_id));
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
