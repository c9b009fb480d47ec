//! An organization's switches: `PATCH /api/v1/orgs/{id} {log_payloads?, cache_breakpoints?}`,
//! by its owner or an admin. Payload logging is the request log's (`request_log/settings.rs`
//! sets a person's own); cache breakpoints (issue 53) are an organization's or a key's only.
//! Both are checked before either is written, and reach this instance's cached keys at once,
//! others within the key cache's bound.

use serde_json::{json, Map, Value};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::accounts::key_settings::{log_payloads, switch};
use crate::accounts::MAX_ACCOUNT_BODY;
use crate::auth::caller::Caller;
use crate::ledger::orgs::Role;
use crate::request::ctx::RequestCtx;
use crate::request::{body, respond, Session};
use crate::runtime::Shared;

/// The settings the body may carry.
const FIELDS: [&str; 2] = ["log_payloads", "cache_breakpoints"];

/// `PATCH /api/v1/orgs/{id}`.
pub async fn patch(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let _ = super::access(shared, session, caller, org, Role::Admin).await?;
    let timeout = shared.runtime.load().config.timeouts.request_body;
    let m: Map<String, Value> = body::json_object(session, MAX_ACCOUNT_BODY, timeout).await?;
    if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(GatewayError::invalid(format!(
            "{k}: not a setting here ({})",
            FIELDS.join(", ")
        )));
    }
    let (logs, marks) = (log_payloads(&m)?, switch(&m, "cache_breakpoints")?);
    if logs.is_none() && marks.is_none() {
        return Err(GatewayError::invalid(
            "log_payloads: is required (true or false), or cache_breakpoints",
        ));
    }
    let ledger = shared.ledger()?;
    let gone = || GatewayError::new(ErrorKind::Authentication, "the account no longer exists");
    if let Some(on) = logs {
        if !ledger.set_log_payloads(org, on).await? {
            return Err(gone());
        }
    }
    if let Some(on) = marks {
        if !ledger.set_cache_breakpoints(org, on).await? {
            return Err(gone());
        }
    }
    shared.keys.evict_account(org);
    let body = json!({
        "object": "settings",
        "account_id": org,
        "log_payloads": ledger.log_payloads(org).await?,
        "cache_breakpoints": ledger.cache_breakpoints(org).await?,
    });
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}
