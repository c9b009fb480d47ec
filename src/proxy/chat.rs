//! `POST /v1/chat/completions`: the pipeline of one chat request.
//!
//! request id → auth → rate limit → body → validate → resolve → plan → credit hold →
//! forward → settle. A request that fails anywhere after the hold is settled too (at zero cost
//! when no output was produced), so every held request ends with exactly one usage row.

use pingora::proxy::Session;
use tollgate_filters::route::Target;
use tollgate_filters::time::http_date;
use tollgate_filters::validate::parse_chat_request;
use tollgate_filters::{ErrorKind, GatewayError};

use super::{body, forward, unix_now, Gateway, RequestCtx};
use crate::auth::Caller;

pub async fn handle(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let result = pipeline(gw, session, ctx).await;
    if let Err(e) = &result {
        ctx.status = e.status();
    }
    crate::metering::settle(gw, ctx).await;
    result
}

async fn pipeline(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let caller = gw.authenticate(session, false).await?;
    gw.rate_limit(session, ctx, &caller).await?;
    let rt = gw.shared.runtime.load_full();
    let max = rt.config.raw.server.max_body_bytes;
    let raw = body::read(session, max).await?;
    let req = parse_chat_request(&raw)?;
    drop(raw);
    ctx.model_requested = Some(req.model.clone());

    let now = unix_now();
    let catalog = &rt.config.catalog;
    let resolution = catalog.resolve(&req.model, now)?;
    let guest = matches!(caller, Caller::Guest);
    if guest {
        if let Target::Model(i) = resolution.target {
            if !catalog.model(i).guest {
                return Err(GatewayError::new(
                    ErrorKind::Authentication,
                    format!(
                        "model `{}` needs an API key: send Authorization: Bearer <API key>",
                        req.model
                    ),
                ));
            }
        }
    }
    let plan = catalog.plan(resolution.target, now, guest, |m| {
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
    let max_tokens = match &caller {
        Caller::Key(key) => crate::metering::hold(gw, ctx, key, catalog, &plan, &req).await?,
        _ => None,
    };
    if let Some(n) = resolution.notice {
        ctx.set_header("Deprecation", format!("@{}", n.deprecated_at));
        ctx.set_header("Sunset", http_date(n.retires_at));
    }
    forward::run(gw, session, ctx, &rt, &req, &plan, max_tokens).await
}
