//! Payload logging as a wallet's setting: `PATCH /api/v1/auth/me {log_payloads}` for a
//! person's own account; an organization's is among its settings (`orgs/settings.rs`). A
//! key's own is a key setting (`PATCH /api/v1/keys/{id}`). The change reaches this instance's
//! cached keys at once, others within the key cache's bound.

use serde_json::{json, Map, Value};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::accounts::MAX_ACCOUNT_BODY;
use crate::auth::caller::Caller;
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond, Session};
use crate::runtime::Shared;

/// `{log_payloads: true|false}`, nothing else.
async fn read(shared: &Shared, session: &mut Session) -> Result<bool, GatewayError> {
    let timeout = shared.runtime.load().config.timeouts.request_body;
    let m: Map<String, Value> = body::json_object(session, MAX_ACCOUNT_BODY, timeout).await?;
    if let Some(k) = m.keys().find(|k| *k != "log_payloads") {
        return Err(GatewayError::invalid(format!(
            "{k}: not a setting here (log_payloads)"
        )));
    }
    crate::accounts::key_settings::log_payloads(&m)?
        .ok_or_else(|| GatewayError::invalid("log_payloads: is required (true or false)"))
}

/// `PATCH /api/v1/auth/me`: the caller's own account.
pub async fn account(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    if let Caller::Key(k) = caller {
        if k.org_member.is_some() {
            return Err(GatewayError::new(
                ErrorKind::Forbidden,
                "an organization key's wallet is the organization's: its owner or an admin sets it (PATCH /api/v1/orgs/{id})",
            ));
        }
    }
    let account = caller.account()?.to_owned();
    let on = read(shared, session).await?;
    set(shared, session, ctx, &account, on).await
}

async fn set(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    wallet: &str,
    on: bool,
) -> Result<(), GatewayError> {
    if !shared.ledger()?.set_log_payloads(wallet, on).await? {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "the account no longer exists",
        ));
    }
    shared.keys.evict_account(wallet);
    let body = json!({"object": "settings", "account_id": wallet, "log_payloads": on});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}
