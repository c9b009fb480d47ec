//! Invitations: an owner or admin invites an e-mail with a role; the invitation is a link
//! with a single-use token that expires (the gateway sends no mail: the link is shown to
//! copy), accepted only by an account with that e-mail (`POST /api/v1/invitations/accept`).

use serde::Deserialize;
use serde_json::{json, Value};
use tollgate_filters::{keys, ErrorKind, GatewayError};

use super::{access, grantable, person, read};
use crate::accounts::random_id;
use crate::accounts::signup::normalise_email;
use crate::auth::caller::Caller;
use crate::ledger::orgs::{Invitation, Refused, Role};
use crate::request::ctx::RequestCtx;
use crate::request::{respond, Session};
use crate::runtime::Shared;

/// How long an invitation is valid unless the body says otherwise.
const DEFAULT_DAYS: i64 = 7;
const MAX_DAYS: i64 = 30;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewInvitation {
    email: String,
    #[serde(default = "member")]
    role: String,
    expires_in_days: Option<i64>,
}

fn member() -> String {
    "member".into()
}

fn invitation_json(i: &Invitation) -> Value {
    json!({"object": "organization.invitation", "id": i.id, "organization_id": i.org_id,
           "email": i.email, "role": i.role.as_str(), "invited_by": i.invited_by,
           "created_at": i.created_at / 1000, "expires_at": i.expires_at / 1000})
}

/// `POST /api/v1/orgs/{id}/invitations {email, role?, expires_in_days?}`: the invitation and
/// its link (shown once: only the token's hash is kept).
pub async fn invite(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (account, _) = access(shared, session, caller, org, Role::Admin).await?;
    let b: NewInvitation = read(shared, session).await?;
    let email = normalise_email(&b.email)?;
    let role = grantable(&b.role)?;
    let days = b.expires_in_days.unwrap_or(DEFAULT_DAYS);
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(GatewayError::invalid(format!(
            "expires_in_days: must be an integer from 1 to {MAX_DAYS}"
        )));
    }
    let token = format!("inv_{}", random_id(40)?);
    let now = crate::clock::now_ms();
    let inv = Invitation {
        id: format!("orginv_{}", random_id(12)?),
        org_id: org.to_owned(),
        email,
        role,
        invited_by: account,
        created_at: now,
        expires_at: now + days * 86_400_000,
        accepted_at: None,
    };
    ledger.invite(&inv, &keys::hash(&token)).await?;
    let base = shared.runtime.load().config.server.public_url.clone();
    let mut v = invitation_json(&inv);
    v["token"] = json!(token);
    v["url"] = json!(format!(
        "{}/dashboard/join?token={token}",
        base.trim_end_matches('/')
    ));
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}

/// `GET /api/v1/orgs/{id}/invitations`: the open invitations (owner or admin).
pub async fn list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let _ = access(shared, session, caller, org, Role::Admin).await?;
    let data: Vec<Value> = ledger
        .invitations(org)
        .await?
        .iter()
        .map(invitation_json)
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
struct Withdrawal {
    id: String,
}

/// `POST /api/v1/orgs/{id}/invitations/withdraw {id}`: an open invitation stops working.
pub async fn withdraw(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let _ = access(shared, session, caller, org, Role::Admin).await?;
    let b: Withdrawal = read(shared, session).await?;
    if !ledger
        .withdraw_invitation(org, &b.id, crate::clock::now_ms())
        .await?
    {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no open invitation `{}` in this organization", b.id),
        ));
    }
    let body = json!({"object": "organization.invitation", "id": b.id, "withdrawn": true});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Acceptance {
    token: String,
}

/// `POST /api/v1/invitations/accept {token}`: the caller joins the organization with the
/// invitation's role, when its e-mail is the invitation's; the token is then used.
pub async fn accept(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let account = person(ledger, caller).await?.to_owned();
    let b: Acceptance = read(shared, session).await?;
    let email = ledger
        .account(&account)
        .await?
        .and_then(|a| a.email)
        .ok_or_else(|| refused(Refused::OtherEmail))?;
    let now = crate::clock::now_ms();
    let (org, role) = ledger
        .accept_invitation(&keys::hash(b.token.trim()), &account, &email, now)
        .await?
        .map_err(refused)?;
    let o = ledger
        .org(&org)
        .await?
        .ok_or_else(|| super::not_found(&org))?;
    let actual = ledger.role(&org, &account).await?.unwrap_or(role);
    respond::json(session, ctx, 200, &super::org_json(&o, actual), &[]).await;
    Ok(())
}

fn refused(why: Refused) -> GatewayError {
    let (kind, message) = match why {
        Refused::Unknown => (
            ErrorKind::NotFound,
            "no such invitation: ask for a new link",
        ),
        Refused::Used => (ErrorKind::Conflict, "this invitation was used already"),
        Refused::Expired => (
            ErrorKind::InvalidRequest,
            "this invitation has expired: ask for a new link",
        ),
        Refused::OtherEmail => (
            ErrorKind::Forbidden,
            "this invitation is for another e-mail address: sign in with the invited one",
        ),
    };
    GatewayError::new(kind, message)
}
