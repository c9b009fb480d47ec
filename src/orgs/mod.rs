//! Organizations (`/api/v1/orgs…`): a shared wallet, plan and limits (the organization's own
//! account), members with a role, invitations ([`invitations`]) and keys owned by members
//! (`accounts/keys.rs`, `organization_id`). Every endpoint checks the caller's role; an
//! organization the caller does not belong to does not exist for it (404, never 403).

pub mod invitations;
pub mod settings;
pub mod sso;
pub mod usage;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tollgate_filters::credits::to_credits;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::accounts::{random_id, MAX_ACCOUNT_BODY};
use crate::auth::caller::Caller;
use crate::ledger::orgs::{Member, Org, Role};
use crate::ledger::Ledger;
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond, Session};
use crate::runtime::Shared;

/// A body of the organizations API as its type: unknown fields refused, the error naming the
/// field.
async fn read<T: DeserializeOwned>(
    shared: &Shared,
    session: &mut Session,
) -> Result<T, GatewayError> {
    let timeout = shared.runtime.load().config.timeouts.request_body;
    let m = body::json_object(session, MAX_ACCOUNT_BODY, timeout).await?;
    serde_json::from_value(Value::Object(m))
        .map_err(|e| GatewayError::invalid(format!("body: {e}")))
}

/// The person calling: an organization's own key manages no organization.
async fn person<'c>(ledger: &Ledger, caller: &'c Caller) -> Result<&'c str, GatewayError> {
    let account = caller.account()?;
    if ledger.is_org(account).await? {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            "an organization key cannot manage organizations: use a personal key or the dashboard",
        ));
    }
    Ok(account)
}

/// The person calling and its role in `org`, at least `needed` ([`role_at_least`]); and when
/// the organization requires single sign-on, a dashboard session must be one its sign-on made
/// (a password session is refused its organization access; API keys are managed by removing
/// members).
pub(crate) async fn access(
    shared: &Shared,
    session: &Session,
    caller: &Caller,
    org: &str,
    needed: Role,
) -> Result<(String, Role), GatewayError> {
    let ledger = shared.ledger()?;
    let account = person(ledger, caller).await?.to_owned();
    let role = role_at_least(ledger, org, &account, needed).await?;
    if let Caller::Session(_) = caller {
        if ledger.sso(org).await?.is_some_and(|s| s.required) {
            let sid = crate::auth::caller::session_cookie(session).unwrap_or_default();
            let via = ledger
                .session_sso_org(&tollgate_filters::keys::hash(&sid))
                .await?;
            if via.as_deref() != Some(org) {
                return Err(GatewayError::new(
                    ErrorKind::Forbidden,
                    format!("this organization requires single sign-on: sign in through /api/v1/sso/{org}/start"),
                ));
            }
        }
    }
    Ok((account, role))
}

pub(crate) fn not_found(org: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, format!("no organization `{org}`"))
}

/// The caller's role in `org`, at least `needed`: 404 when it is no member (the organization
/// is not revealed), 403 naming the role when it is one with too little.
pub(crate) async fn role_at_least(
    ledger: &Ledger,
    org: &str,
    account: &str,
    needed: Role,
) -> Result<Role, GatewayError> {
    let Some(role) = ledger.role(org, account).await? else {
        return Err(not_found(org));
    };
    if role < needed {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            format!(
                "this needs the {} role in the organization; yours is {}",
                needed.as_str(),
                role.as_str()
            ),
        ));
    }
    Ok(role)
}

fn org_json(o: &Org, role: Role) -> Value {
    json!({"object": "organization", "id": o.id, "name": o.name, "plan": o.plan,
           "credits": to_credits(o.balance), "role": role.as_str(), "created_at": o.created_at / 1000,
           "allowed_models": o.allowed_models})
}

fn member_json(m: &Member, now_ms: i64) -> Value {
    json!({"object": "organization.member", "account_id": m.account_id, "email": m.email,
           "role": m.role.as_str(), "joined_at": m.joined_at / 1000,
           "cap_credits": m.cap.map(|c| to_credits(c.0)), "cap_period": m.cap.map(|c| c.1.as_str()),
           "cap_resets_at": m.cap.and_then(|c| c.1.next(now_ms)).map(|t| t / 1000)})
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewOrg {
    name: String,
}

/// `POST /api/v1/orgs {name}`: a new organization with the caller as its owner, an empty
/// wallet, the free plan.
pub async fn create(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let owner = person(ledger, caller).await?.to_owned();
    let b: NewOrg = read(shared, session).await?;
    let name = b.name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(GatewayError::invalid(
            "name: must be 1 to 100 printable characters",
        ));
    }
    let id = format!("org_{}", random_id(12)?);
    let org = ledger
        .create_org(&id, name, &owner, crate::clock::now_ms())
        .await?;
    respond::json(session, ctx, 201, &org_json(&org, Role::Owner), &[]).await;
    Ok(())
}

/// `GET /api/v1/orgs`: the organizations the caller belongs to, with its role in each.
pub async fn list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let account = person(ledger, caller).await?;
    let data: Vec<Value> = ledger
        .orgs_of(account)
        .await?
        .iter()
        .map(|(o, r)| org_json(o, *r))
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

/// `GET /api/v1/orgs/{id}`: one of the caller's organizations.
pub async fn get(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (_, role) = access(shared, session, caller, org, Role::Member).await?;
    let o = ledger.org(org).await?.ok_or_else(|| not_found(org))?;
    let mut v = org_json(&o, role);
    v["log_payloads"] = ledger.log_payloads(org).await?.into();
    v["cache_breakpoints"] = ledger.cache_breakpoints(org).await?.into();
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}

/// `GET /api/v1/orgs/{id}/members`: who belongs, with their roles (any member may see).
pub async fn members(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let _ = access(shared, session, caller, org, Role::Member).await?;
    let now = crate::clock::now_ms();
    let data: Vec<Value> = ledger
        .members(org)
        .await?
        .iter()
        .map(|m| member_json(m, now))
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleChange {
    account_id: String,
    role: String,
}

/// A role an owner or admin may give: admin or member (ownership is transferred).
fn grantable(role: &str) -> Result<Role, GatewayError> {
    match Role::parse(role) {
        Some(r @ (Role::Admin | Role::Member)) => Ok(r),
        Some(Role::Owner) => Err(GatewayError::invalid(
            "role: ownership is transferred (POST /api/v1/orgs/{id}/transfer), not granted",
        )),
        None => Err(GatewayError::invalid("role: must be `admin` or `member`")),
    }
}

fn no_member(account: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!("no member `{account}` in this organization"),
    )
}

/// `PATCH /api/v1/orgs/{id}/members {account_id, role}`: an owner or admin sets a member's
/// role (admin or member; never the owner's).
pub async fn set_role(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let _ = access(shared, session, caller, org, Role::Admin).await?;
    let b: RoleChange = read(shared, session).await?;
    let role = grantable(&b.role)?;
    match ledger.role(org, &b.account_id).await? {
        None => return Err(no_member(&b.account_id)),
        Some(Role::Owner) => {
            return Err(GatewayError::new(
                ErrorKind::Forbidden,
                "the owner's role changes only by a transfer of ownership",
            ))
        }
        Some(_) => {}
    }
    if !ledger.set_role(org, &b.account_id, role).await? {
        return Err(no_member(&b.account_id));
    }
    members(shared, session, ctx, caller, org).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Someone {
    account_id: String,
}

/// `POST /api/v1/orgs/{id}/members/remove {account_id}`: an owner or admin removes a member
/// (never the owner); its organization keys stop working on every instance within the key
/// cache's bound.
pub async fn remove(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let (account, role) = access(shared, session, caller, org, Role::Member).await?;
    let b: Someone = read(shared, session).await?;
    if b.account_id != account && role < Role::Admin {
        role_at_least(shared.ledger()?, org, &account, Role::Admin).await?;
    }
    drop_member(shared, session, ctx, org, &b.account_id).await
}

/// `POST /api/v1/orgs/{id}/leave`: a member (not the owner) leaves; its organization keys
/// stop working.
pub async fn leave(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let (account, _) = access(shared, session, caller, org, Role::Member).await?;
    drop_member(shared, session, ctx, org, &account).await
}

async fn drop_member(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    org: &str,
    member: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    match ledger.role(org, member).await? {
        None => return Err(no_member(member)),
        Some(Role::Owner) => {
            return Err(GatewayError::new(
                ErrorKind::Forbidden,
                "the owner cannot leave or be removed: transfer ownership first",
            ))
        }
        Some(_) => {}
    }
    let Some(hashes) = ledger
        .remove_member(org, member, crate::clock::now_ms())
        .await?
    else {
        return Err(no_member(member));
    };
    for h in &hashes {
        shared.keys.evict(h);
    }
    let body = json!({"object": "organization.member", "account_id": member, "removed": true,
                      "keys_revoked": hashes.len()});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// `POST /api/v1/orgs/{id}/transfer {account_id}`: the owner makes a member the owner and
/// becomes an admin.
pub async fn transfer(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (account, _) = access(shared, session, caller, org, Role::Owner).await?;
    let b: Someone = read(shared, session).await?;
    if b.account_id == account {
        return Err(GatewayError::invalid(
            "account_id: you own this organization already",
        ));
    }
    if !ledger.transfer_org(org, &account, &b.account_id).await? {
        return Err(no_member(&b.account_id));
    }
    members(shared, session, ctx, caller, org).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapChange {
    account_id: String,
    /// Credits per period; `null` removes the cap.
    cap_credits: Option<f64>,
    #[serde(default)]
    period: Option<String>,
}

/// The largest cap, in credits: far above any real one, below what the counters overflow at.
const MAX_CAP_CREDITS: f64 = 1e9;

/// `PUT /api/v1/orgs/{id}/caps {account_id, cap_credits, period}`: an owner or admin caps
/// what a member's organization keys spend per day, week or month (`cap_credits: null`
/// removes it); held like the wallet, exact across instances. The change reaches every
/// instance within the key cache's bound.
pub async fn set_cap(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    use tollgate_filters::budget::Period;
    use tollgate_filters::credits::from_credits;
    let ledger = shared.ledger()?;
    let _ = access(shared, session, caller, org, Role::Admin).await?;
    let b: CapChange = read(shared, session).await?;
    let cap = match b.cap_credits {
        None => None,
        Some(c) if (0.0..=MAX_CAP_CREDITS).contains(&c) => {
            let period = match b.period.as_deref().map(Period::parse) {
                Some(Some(p @ (Period::Day | Period::Week | Period::Month))) => p,
                _ => {
                    return Err(GatewayError::invalid(
                        "period: must be `day`, `week` or `month`",
                    ))
                }
            };
            from_credits(c).map(|m| (m, period))
        }
        Some(_) => {
            return Err(GatewayError::invalid(
                "cap_credits: must be a number of credits from 0 to 1000000000, or null",
            ))
        }
    };
    let Some(hashes) = ledger.set_cap(org, &b.account_id, cap).await? else {
        return Err(no_member(&b.account_id));
    };
    for h in &hashes {
        shared.keys.evict(h);
    }
    members(shared, session, ctx, caller, org).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsChange {
    /// Ids, aliases or tiers; `null`: every model; absent: refused (a forgotten field must not
    /// lift the list).
    #[serde(default, deserialize_with = "present")]
    allowed_models: Option<Option<Vec<String>>>,
}

/// A field that may be `null`, told apart from one that is absent.
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Vec<String>>>, D::Error> {
    Option::<Vec<String>>::deserialize(d).map(Some)
}

/// `PUT /api/v1/orgs/{id}/models {allowed_models}`: an owner or admin limits every
/// organization key to these models (within each key's own list); `null` lifts it. An entry
/// the catalog does not know is a 400 naming it.
pub async fn set_models(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (_, role) = access(shared, session, caller, org, Role::Admin).await?;
    let b: ModelsChange = read(shared, session).await?;
    let Some(wanted) = b.allowed_models else {
        return Err(GatewayError::invalid(
            "allowed_models: required: a list of models, or null",
        ));
    };
    let stored = match &wanted {
        None => None,
        Some(list) => {
            if list.is_empty() || list.len() > 100 {
                return Err(GatewayError::invalid(
                    "allowed_models: 1 to 100 names, or null",
                ));
            }
            let rt = shared.runtime.load();
            let now = crate::clock::now_secs();
            if let Err(i) = crate::auth::allowlist::allowed(&rt.config.catalog, list, now) {
                return Err(GatewayError::invalid(format!(
                    "allowed_models[{i}]: `{}` is not a model, alias or tier of this gateway",
                    list[i]
                )));
            }
            Some(json!(list).to_string())
        }
    };
    for h in ledger.set_org_models(org, stored.as_deref()).await? {
        shared.keys.evict(&h);
    }
    let o = ledger.org(org).await?.ok_or_else(|| not_found(org))?;
    respond::json(session, ctx, 200, &org_json(&o, role), &[]).await;
    Ok(())
}
