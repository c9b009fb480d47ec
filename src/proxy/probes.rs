//! `GET /healthz` (the process answers) and `GET /readyz` (the ledger answers and at least one
//! upstream is usable): what a load balancer or an orchestrator polls.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::GatewayError;

use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub async fn healthz(session: &mut Session, ctx: &mut RequestCtx) -> Result<(), GatewayError> {
    respond::json(session, ctx, 200, &json!({"status": "ok"}), &[]).await;
    Ok(())
}

pub async fn readyz(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    // Not ready while the ledger's circuit is open either: requests that need it are refused
    // at once until the next probe closes it.
    let ledger = match shared.ledger.get() {
        Some(l) => l.ping().await && !crate::ledger::breaker::is_open(),
        None => false,
    };
    let rt = shared.runtime.load();
    let providers: serde_json::Map<String, serde_json::Value> = rt
        .pools
        .iter()
        .map(|(name, p)| (name.clone(), p.has_usable_endpoint().into()))
        .collect();
    let any = providers
        .values()
        .any(|v| v == &serde_json::Value::Bool(true));
    let status = if any && ledger { 200 } else { 503 };
    let why = match (ledger, any) {
        (true, true) => "ready",
        (false, _) => "ledger store unreachable",
        (true, false) => "no healthy upstream",
    };
    let body = json!({"status": why, "ledger": ledger, "providers": providers});
    respond::json(session, ctx, status, &body, &[]).await;
    Ok(())
}
