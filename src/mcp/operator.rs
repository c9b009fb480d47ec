//! The operator's side of the marketplace (admin API): list the tool servers by status and
//! approve, reject, suspend and resume them. First-party servers are registered through
//! [`super::developer::register`] with no owner in the path.

use crate::request::Session;
use serde_json::{json, Value};
use tollgate_filters::mcp::{Move, ServiceState};
use tollgate_filters::{ErrorKind, GatewayError};

use super::developer::service_json;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;
use crate::tool_servers::check::live_check;

/// `POST /api/v1/admin/mcp/services/{slug}/{action}`. Approval and resumption check the server
/// live again and refresh its cached tools; a server failing that check stays where it was.
pub async fn admin_move(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    slug: &str,
    action: Move,
) -> Result<(), GatewayError> {
    let (from, to) = (action.from(), action.to());
    let ledger = shared.ledger()?;
    let current = ledger
        .service(slug)
        .await?
        .ok_or_else(|| GatewayError::new(ErrorKind::NotFound, format!("no service `{slug}`")))?;
    if !from.contains(&current.status) {
        let needs: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        return Err(GatewayError::new(
            ErrorKind::Conflict,
            format!(
                "status: `{slug}` is {}; {} needs {}",
                current.status,
                action.as_str(),
                needs.join(" or ")
            ),
        ));
    }
    let tools = if to == ServiceState::Live {
        Some(live_check(shared, &current.upstream_url).await?)
    } else {
        None
    };
    let now = crate::clock::now_ms();
    let s = ledger
        .set_service_status(slug, from, to, tools.as_ref(), now)
        .await?
        .ok_or_else(|| {
            GatewayError::new(
                ErrorKind::Conflict,
                format!("status: `{slug}` changed meanwhile"),
            )
        })?;
    shared.mcp.invalidate();
    shared
        .webhooks
        .tool_server_moved(&s.owner_id, slug, (current.status, to), now);
    shared
        .metrics
        .mcp_events
        .with_label_values(&[slug, action.as_str()])
        .inc();
    respond::json(session, ctx, 200, &service_json(&s), &[]).await;
    Ok(())
}

/// `GET /api/v1/admin/mcp/services?status=…`
pub async fn admin_list(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let query = session.req_header().uri.query().unwrap_or("").to_owned();
    let status = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("status="))
        .filter(|s| !s.is_empty());
    let status = match status {
        None => None,
        Some(s) => Some(ServiceState::parse(s).ok_or_else(|| {
            GatewayError::invalid("status: must be pending, live, rejected or suspended")
        })?),
    };
    let list = shared.ledger()?.services(None, status).await?;
    let data: Vec<Value> = list.iter().map(service_json).collect();
    respond::json(session, ctx, 200, &json!({"data": data}), &[]).await;
    Ok(())
}
