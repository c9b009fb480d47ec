//! The request log as its readers see it: `GET /api/v1/requests` (the caller's wallet, or one
//! of its organizations': an owner or admin sees every member's requests, a member its own
//! keys'), `GET /api/v1/requests/{id}` (one record with its legs and payloads), and the
//! operator's `GET /api/v1/admin/requests?account_id=` and `GET /api/v1/admin/requests/{id}`.
//! A page is JSON (`next_cursor` for the next one) or JSON lines with the payloads
//! (`format=jsonl`, the next cursor in `X-Next-Cursor`). A record of a wallet the caller may
//! not read is 404, as one that never was.

use serde_json::{json, Value};
use tollgate_filters::credits::to_credits;
use tollgate_filters::request_query::{self, Cursor, Format, Of, Query};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::ledger::orgs::Role;
use crate::ledger::request_log::{LogFilter, LogRow};
use crate::request::ctx::RequestCtx;
use crate::request::{respond, Session};
use crate::runtime::Shared;

/// `GET /api/v1/requests`.
pub async fn list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let q = request_query::parse(session.req_header().uri.query(), Of::Caller)?;
    let (wallet, member) = scope(shared, session, caller, q.organization_id.as_deref()).await?;
    page(shared, session, ctx, &q, &wallet, member.as_deref()).await
}

/// `GET /api/v1/admin/requests?account_id=`: any wallet's records, for the operator.
pub async fn admin_list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let q = request_query::parse(session.req_header().uri.query(), Of::Operator)?;
    let wallet = q.account_id.clone().unwrap_or_default();
    page(shared, session, ctx, &q, &wallet, None).await
}

/// `GET /api/v1/requests/{id}`.
pub async fn get(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    no_query(session)?;
    let row = shared.ledger()?.request_log_record(id).await?;
    let Some(row) = row else {
        return Err(not_found(id));
    };
    if !visible(shared, session, caller, &row).await? {
        return Err(not_found(id));
    }
    respond::json(session, ctx, 200, &record_json(&row, true), &[]).await;
    Ok(())
}

/// `GET /api/v1/admin/requests/{id}`.
pub async fn admin_get(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    id: &str,
) -> Result<(), GatewayError> {
    no_query(session)?;
    let row = shared.ledger()?.request_log_record(id).await?;
    let row = row.ok_or_else(|| not_found(id))?;
    respond::json(session, ctx, 200, &record_json(&row, true), &[]).await;
    Ok(())
}

fn not_found(id: &str) -> GatewayError {
    GatewayError::new(ErrorKind::NotFound, format!("no request `{id}`"))
}

fn no_query(session: &Session) -> Result<(), GatewayError> {
    match session.req_header().uri.query() {
        None | Some("") => Ok(()),
        Some(q) => {
            let name = q.split(['=', '&']).next().unwrap_or(q);
            Err(GatewayError::invalid(format!(
                "{name}: one request takes no parameters"
            )))
        }
    }
}

/// Whose records the caller lists: a wallet, and only one member's keys' in it when the
/// caller is that member (an organization key, or a member who is not an owner or admin).
async fn scope(
    shared: &Shared,
    session: &Session,
    caller: &Caller,
    org: Option<&str>,
) -> Result<(String, Option<String>), GatewayError> {
    if let Caller::Key(k) = caller {
        if let Some(m) = &k.org_member {
            // An organization key reads its member's requests in its organization.
            return match org {
                Some(o) if o != k.account_id => Err(crate::orgs::not_found(o)),
                _ => Ok((k.account_id.clone(), Some(m.account.clone()))),
            };
        }
    }
    match org {
        None => Ok((caller.account()?.to_owned(), None)),
        Some(o) => {
            let (account, role) =
                crate::orgs::access(shared, session, caller, o, Role::Member).await?;
            Ok((o.to_owned(), (role == Role::Member).then_some(account)))
        }
    }
}

/// Whether the caller may read `row`: its own wallet's (an organization key: its member's), or
/// an organization's it belongs to (a member: its own keys').
async fn visible(
    shared: &Shared,
    session: &Session,
    caller: &Caller,
    row: &LogRow,
) -> Result<bool, GatewayError> {
    if let Caller::Key(k) = caller {
        if let Some(m) = &k.org_member {
            return Ok(row.account_id == k.account_id
                && row.member_id.as_deref() == Some(m.account.as_str()));
        }
    }
    let me = caller.account()?;
    if row.account_id == me {
        return Ok(true);
    }
    if row.member_id.is_none() {
        // A person's own wallet: nobody else's.
        return Ok(false);
    }
    match crate::orgs::access(shared, session, caller, &row.account_id, Role::Member).await {
        Ok((account, role)) => {
            Ok(role > Role::Member || row.member_id.as_deref() == Some(&account))
        }
        Err(e) if e.kind == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

async fn page(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    q: &Query,
    wallet: &str,
    member: Option<&str>,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let filter = LogFilter {
        account_id: wallet,
        member_id: member,
        key_id: q.key_id.as_deref(),
        model: q.model.as_deref(),
        status: q.status,
        since_ms: q.since_ms,
        until_ms: q.until_ms,
        after: q.cursor.as_ref(),
        // One more than the page: whether there is a next one.
        limit: q.limit + 1,
        payloads: q.format == Format::JsonLines,
    };
    let mut rows = ledger.list_request_log(&filter).await?;
    let more = rows.len() as i64 > q.limit;
    rows.truncate(q.limit as usize);
    let next = rows.last().filter(|_| more).map(|r| {
        Cursor {
            created_at: r.created_at,
            request_id: r.request_id.clone(),
        }
        .encode()
    });
    if q.format == Format::JsonLines {
        let mut out = Vec::new();
        for r in &rows {
            // A `Value` always serializes.
            let _ = serde_json::to_writer(&mut out, &record_json(r, true));
            out.push(b'\n');
        }
        let extra: Vec<(&'static str, String)> =
            next.map(|c| vec![("X-Next-Cursor", c)]).unwrap_or_default();
        respond::send(session, ctx, 200, "application/jsonl", out, &extra).await;
        return Ok(());
    }
    let data: Vec<Value> = rows.iter().map(|r| record_json(r, false)).collect();
    let body = json!({"object": "list", "data": data, "has_more": more, "next_cursor": next});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// A record as the API shows it; `payloads`: with its bodies (when stored).
pub fn record_json(r: &LogRow, payloads: bool) -> Value {
    let legs: Value = serde_json::from_str(&r.legs).unwrap_or(Value::Array(Vec::new()));
    let stored = r.request_truncated.is_some() || r.response_truncated.is_some();
    let mut v = json!({
        "object": "request", "id": r.request_id, "created_at": r.created_at / 1000,
        "created_at_ms": r.created_at, "account_id": r.account_id, "member_id": r.member_id,
        "key_id": r.key_id, "door": r.door, "route": r.route,
        "model_requested": r.model_requested, "model_used": r.model_used, "provider": r.provider,
        "status": r.status, "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens, "cost": r.cost_micros.map(to_credits),
        "latency_ms": r.latency_ms, "ttft_ms": r.ttft_ms, "legs": legs, "error": r.error,
        "payload_stored": stored,
    });
    if payloads {
        v["request_body"] = r.request_body.clone().into();
        v["request_truncated"] = r.request_truncated.into();
        v["response_body"] = r.response_body.clone().into();
        v["response_truncated"] = r.response_truncated.into();
    }
    v
}
