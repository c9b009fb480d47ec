//! `POST /v1/chat/completions`: read and validate the body, resolve the model, plan the
//! candidates, then hand over to the forwarding loop.
//!
//! Pipeline order (DESIGN.md): request id → auth → rate limit → body → route plan → credit
//! hold → forward → settle. Auth, rate limits and the credit hold slot in between the steps
//! below as the issues that add them land.

use bytes::BytesMut;
use pingora::proxy::Session;
use tollgate_filters::route::Target;
use tollgate_filters::time::http_date;
use tollgate_filters::validate::parse_chat_request;
use tollgate_filters::GatewayError;

use super::{forward, unix_now, Gateway, RequestCtx};

pub async fn handle(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let rt = gw.shared.runtime.load_full();
    let max = rt.config.raw.server.max_body_bytes;
    let raw = read_body(session, max).await?;
    let req = parse_chat_request(&raw)?;
    drop(raw);
    ctx.model_requested = Some(req.model.clone());

    let now = unix_now();
    let catalog = &rt.config.catalog;
    let resolution = catalog.resolve(&req.model, now)?;
    let plan = catalog.plan(resolution.target, now, false, |m| {
        rt.pools
            .get(&m.provider)
            .is_some_and(|p| p.has_usable_endpoint())
    });
    if plan.is_empty() {
        let what = match resolution.target {
            Target::Model(i) => catalog.model(i).id.clone(),
            Target::Tier(t) => format!("tier {}", t.as_str()),
        };
        return Err(GatewayError::upstream(format!(
            "no healthy upstream can serve {what}"
        )));
    }
    let mut extra: Vec<(&'static str, String)> = Vec::new();
    if let Some(n) = resolution.notice {
        extra.push(("Deprecation", format!("@{}", n.deprecated_at)));
        extra.push(("Sunset", http_date(n.retires_at)));
    }
    forward::run(gw, session, ctx, &rt, &req, &plan, &extra).await
}

/// Reads the whole body, refusing more than `max` bytes without buffering them.
async fn read_body(session: &mut Session, max: usize) -> Result<BytesMut, GatewayError> {
    let too_big = || GatewayError::invalid(format!("body: larger than the limit of {max} bytes"));
    if let Some(len) = session
        .req_header()
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        if len > max {
            return Err(too_big());
        }
    }
    let mut buf = BytesMut::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if buf.len() + chunk.len() > max {
                    return Err(too_big());
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(GatewayError::invalid(format!(
                    "body: could not be read ({e})"
                )))
            }
        }
    }
    if buf.is_empty() {
        return Err(GatewayError::invalid("body: is empty; send a JSON object"));
    }
    Ok(buf)
}
