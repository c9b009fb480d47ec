//! `/api/v1/webhooks…`: an account's endpoints (its own wallet's) or an organization's (its
//! owners and admins only; an organization the caller is not in is 404, a member's role too
//! small 403, as every organization endpoint). The signing secret is shown at creation and
//! rotation only. Every field is checked, each error naming its field; nothing is written
//! unless all of the body is good.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tollgate_filters::credits::{from_credits, to_credits};
use tollgate_filters::webhook::{known_event, EVENT_TYPES, TEST_EVENT};
use tollgate_filters::{ErrorKind, GatewayError};

use super::target;
use crate::accounts::MAX_ACCOUNT_BODY;
use crate::auth::caller::Caller;
use crate::ledger::orgs::Role;
use crate::ledger::webhooks::{DeliveryRow, Endpoint, EndpointChange};
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond, Session};
use crate::runtime::Shared;

/// The largest balance threshold, in credits.
const MAX_THRESHOLD: f64 = 1e9;
/// Delivery log rows shown.
const LOG_ROWS: i64 = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewEndpoint {
    url: Value,
    events: Value,
    #[serde(default)]
    description: Option<Value>,
    #[serde(default)]
    organization_id: Option<Value>,
    #[serde(default)]
    balance_threshold: Option<Value>,
}

/// A change: an absent field stays, `null` clears `description` and `balance_threshold`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    #[serde(default)]
    url: Option<Value>,
    #[serde(default)]
    events: Option<Value>,
    #[serde(default)]
    enabled: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    description: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    balance_threshold: Option<Value>,
}

/// A field that may be `null`, told apart from one that is absent.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The body as its type; serde's `unknown field `x`` and `missing field `x`` become errors
/// naming `x`.
async fn read<T: DeserializeOwned>(
    shared: &Shared,
    session: &mut Session,
) -> Result<T, GatewayError> {
    let timeout = shared.runtime.load().config.timeouts.request_body;
    let m: Map<String, Value> = body::json_object(session, MAX_ACCOUNT_BODY, timeout).await?;
    serde_json::from_value(Value::Object(m)).map_err(|e| {
        let text = e.to_string();
        match text.split('`').nth(1) {
            Some(field) if text.starts_with("unknown field") => {
                GatewayError::invalid(format!("{field}: unknown field"))
            }
            Some(field) if text.starts_with("missing field") => {
                GatewayError::invalid(format!("{field}: required"))
            }
            _ => GatewayError::invalid(format!("body: {text}")),
        }
    })
}

/// `v` as a `T`, or 400 naming `field`.
fn typed<T: DeserializeOwned>(field: &str, v: Value, what: &str) -> Result<T, GatewayError> {
    serde_json::from_value(v).map_err(|_| GatewayError::invalid(format!("{field}: must be {what}")))
}

fn check_events(v: Value) -> Result<Vec<String>, GatewayError> {
    let list: Vec<String> = typed("events", v, "a list of event names")?;
    if list.is_empty() {
        return Err(GatewayError::invalid("events: choose at least one event"));
    }
    let mut out: Vec<String> = Vec::new();
    for (i, e) in list.into_iter().enumerate() {
        if !known_event(&e) {
            return Err(GatewayError::invalid(format!(
                "events[{i}]: `{e}` is not an event; choose from {}",
                EVENT_TYPES.join(", ")
            )));
        }
        if !out.contains(&e) {
            out.push(e);
        }
    }
    Ok(out)
}

fn check_description(v: Value) -> Result<Option<String>, GatewayError> {
    let d: Option<String> = typed("description", v, "a string or null")?;
    match d {
        Some(d) if d.chars().count() > 200 || d.chars().any(char::is_control) => Err(
            GatewayError::invalid("description: at most 200 printable characters"),
        ),
        d => Ok(d.filter(|d| !d.trim().is_empty())),
    }
}

fn check_threshold(v: Value) -> Result<Option<i64>, GatewayError> {
    let t: Option<f64> = typed("balance_threshold", v, "a number of credits or null")?;
    match t {
        None => Ok(None),
        Some(c) if (0.0..=MAX_THRESHOLD).contains(&c) => Ok(from_credits(c)),
        Some(_) => Err(GatewayError::invalid(
            "balance_threshold: must be from 0 to 1000000000 credits",
        )),
    }
}

/// The URL's shape and the SSRF rule at its resolved addresses.
async fn check_url(shared: &Shared, v: Value) -> Result<String, GatewayError> {
    let url: String = typed("url", v, "a string")?;
    let cfg = shared.runtime.load().config.webhooks.clone();
    target::resolve(&url, cfg.allow_private_targets, cfg.timeout)
        .await
        .map_err(|e| GatewayError::invalid(format!("url: {e}")))?;
    Ok(url)
}

fn no_endpoint(id: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, format!("no webhook endpoint `{id}`"))
}

/// The wallet the caller manages here: `org` (an owner or admin of it), else its own
/// account (never through an organization's key).
async fn wallet(
    shared: &Shared,
    session: &Session,
    caller: &Caller,
    org: Option<&str>,
) -> Result<(String, bool), GatewayError> {
    if let Some(org) = org {
        crate::orgs::access(shared, session, caller, org, Role::Admin).await?;
        return Ok((org.to_owned(), true));
    }
    let account = caller.account()?;
    if shared.ledger()?.is_org(account).await? {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            "an organization key cannot manage webhooks: use a personal key with organization_id",
        ));
    }
    Ok((account.to_owned(), false))
}

/// Endpoint `id`, when the caller may manage it: its own, or its organization's as an owner
/// or admin (a member is told its role is too small); anyone else's is 404.
async fn owned(
    shared: &Shared,
    session: &Session,
    caller: &Caller,
    id: &str,
) -> Result<Endpoint, GatewayError> {
    let e = shared
        .ledger()?
        .endpoint(id)
        .await?
        .ok_or_else(|| no_endpoint(id))?;
    let org = e.is_org.then_some(e.wallet_id.as_str());
    match wallet(shared, session, caller, org).await {
        Ok((w, _)) if w == e.wallet_id => Ok(e),
        Err(err) if err.kind == ErrorKind::Forbidden && e.is_org => Err(err),
        _ => Err(no_endpoint(id)),
    }
}

fn endpoint_json(e: &Endpoint) -> Value {
    let mut v = json!({"object": "webhook_endpoint", "id": e.id, "url": e.url,
        "description": e.description, "events": e.events, "enabled": e.enabled,
        "balance_threshold": e.balance_threshold.map(to_credits),
        "created_at": e.created_at / 1000, "account_id": null, "organization_id": null});
    let owner = if e.is_org {
        "organization_id"
    } else {
        "account_id"
    };
    v[owner] = e.wallet_id.clone().into();
    v
}

fn delivery_json(d: &DeliveryRow) -> Value {
    json!({"object": "webhook_delivery", "sequence": d.seq, "event_id": d.event_id,
        "type": d.event_type, "status": d.status, "attempts": d.attempts,
        "last_status": d.last_status, "last_error": d.last_error,
        "created_at": d.created_at / 1000, "finished_at": d.finished_at.map(|t| t / 1000),
        "next_attempt_at": (d.status == "pending").then_some(d.next_at / 1000)})
}

fn new_secret() -> Result<String, GatewayError> {
    Ok(format!("whsec_{}", crate::auth::random_id(32)?))
}

/// `POST /api/v1/webhooks {url, events, description?, organization_id?, balance_threshold?}`:
/// 201 with the endpoint and its signing `secret` (shown this once).
pub async fn create(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let b: NewEndpoint = read(shared, session).await?;
    let org: Option<String> = match b.organization_id {
        Some(v) => typed("organization_id", v, "a string or null")?,
        None => None,
    };
    let events = check_events(b.events)?;
    let description = b.description.map(check_description).transpose()?.flatten();
    let threshold = b
        .balance_threshold
        .map(check_threshold)
        .transpose()?
        .flatten();
    let (wallet_id, is_org) = wallet(shared, session, caller, org.as_deref()).await?;
    let url = check_url(shared, b.url).await?;
    let ledger = shared.ledger()?;
    let most = shared.runtime.load().config.webhooks.max_endpoints;
    if ledger.endpoints(&wallet_id).await?.len() >= most {
        return Err(GatewayError::new(
            ErrorKind::Conflict,
            format!("url: this wallet has {most} endpoints already, the most allowed"),
        ));
    }
    let e = Endpoint {
        id: format!("we_{}", crate::auth::random_id(16)?),
        wallet_id,
        is_org,
        url,
        description,
        events,
        secret: new_secret()?,
        enabled: true,
        balance_threshold: threshold,
        balance_low: false,
        created_at: crate::clock::now_ms(),
    };
    ledger.create_endpoint(&e).await?;
    shared.webhooks.changed(&e.wallet_id);
    let mut v = endpoint_json(&e);
    v["secret"] = e.secret.clone().into();
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}

/// `GET /api/v1/webhooks[?organization_id=…]`.
pub async fn list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let query = session.req_header().uri.query().unwrap_or("").to_owned();
    let org = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("organization_id="))
        .filter(|s| !s.is_empty());
    let (wallet_id, _) = wallet(shared, session, caller, org).await?;
    let data: Vec<Value> = shared
        .ledger()?
        .endpoints(&wallet_id)
        .await?
        .iter()
        .map(endpoint_json)
        .collect();
    let v = json!({"object": "list", "data": data});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `GET /api/v1/webhooks/{id}`.
pub async fn get(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let e = owned(shared, session, caller, id).await?;
    respond::json(session, ctx, 200, &endpoint_json(&e), &[]).await;
    Ok(())
}

/// `PATCH /api/v1/webhooks/{id} {url?, events?, enabled?, description?, balance_threshold?}`:
/// a new URL is checked again.
pub async fn update(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let e = owned(shared, session, caller, id).await?;
    let b: Change = read(shared, session).await?;
    let mut c = EndpointChange {
        events: b.events.map(check_events).transpose()?,
        enabled: b
            .enabled
            .map(|v| typed::<bool>("enabled", v, "true or false"))
            .transpose()?,
        description: b.description.map(check_description).transpose()?,
        balance_threshold: b.balance_threshold.map(check_threshold).transpose()?,
        url: None,
    };
    if let Some(u) = b.url {
        c.url = Some(check_url(shared, u).await?);
    }
    let ledger = shared.ledger()?;
    if !ledger.update_endpoint(id, &c).await? {
        return Err(no_endpoint(id));
    }
    shared.webhooks.changed(&e.wallet_id);
    let e = ledger.endpoint(id).await?.ok_or_else(|| no_endpoint(id))?;
    respond::json(session, ctx, 200, &endpoint_json(&e), &[]).await;
    Ok(())
}

/// `DELETE /api/v1/webhooks/{id}`: the endpoint and its pending deliveries.
pub async fn delete(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let e = owned(shared, session, caller, id).await?;
    if !shared.ledger()?.delete_endpoint(id).await? {
        return Err(no_endpoint(id));
    }
    shared.webhooks.changed(&e.wallet_id);
    let v = json!({"object": "webhook_endpoint", "id": id, "deleted": true});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `POST /api/v1/webhooks/{id}/test`: a `webhook.test` event to this endpoint only, queued
/// behind its other events (202 with the event's id).
pub async fn test(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let e = owned(shared, session, caller, id).await?;
    let nonce = crate::auth::random_id(16)?;
    let data = json!({"endpoint_id": e.id, "message": "a test event sent from Tollgate"});
    let dedupe = format!("{TEST_EVENT}:{}:{nonce}", e.id);
    let written = super::emit(
        shared.ledger()?,
        &e.wallet_id,
        TEST_EVENT,
        &dedupe,
        data,
        Some(&e.id),
    )
    .await?;
    let v = json!({"object": "webhook_test", "endpoint_id": e.id, "event_id": written});
    respond::json(session, ctx, 202, &v, &[]).await;
    Ok(())
}

/// `GET /api/v1/webhooks/{id}/deliveries`: the delivery log, newest first.
pub async fn deliveries(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let e = owned(shared, session, caller, id).await?;
    let data: Vec<Value> = shared
        .ledger()?
        .deliveries(&e.id, LOG_ROWS)
        .await?
        .iter()
        .map(delivery_json)
        .collect();
    let v = json!({"object": "list", "data": data});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `POST /api/v1/webhooks/{id}/rotate_secret`: a new signing secret, shown this once; the old
/// one signs nothing from now on.
pub async fn rotate_secret(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let e = owned(shared, session, caller, id).await?;
    let secret = new_secret()?;
    if !shared.ledger()?.set_endpoint_secret(&e.id, &secret).await? {
        return Err(no_endpoint(id));
    }
    let mut v = endpoint_json(&e);
    v["secret"] = secret.into();
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}
