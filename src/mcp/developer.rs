//! The developer's side of the marketplace (DESIGN.md, Rules: MCP): a developer registers a
//! tool server (`POST /api/v1/mcp/services`, checked live), lists and changes their own, and
//! reads what their servers earned. The operator registers first-party servers through
//! [`register`] too (no price cap); the operator's other moves are in [`super::operator`].

use std::collections::BTreeMap;

use crate::request::Session;
use serde_json::{json, Map, Value};
use tollgate_filters::credits::to_credits;
use tollgate_filters::mcp::{valid_slug, ServiceState};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::ledger::mcp::{Service, ServiceChange};
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;
use crate::tool_servers::check::live_check;

const MAX_BODY: usize = 16 * 1024;

/// The service as its owner and the operator see it.
pub fn service_json(s: &Service) -> Value {
    let tools: Vec<&str> = s.tool_names().collect();
    json!({"id": s.id, "slug": s.slug, "name": s.name, "description": s.description,
        "upstream_url": s.upstream_url, "default_credits": s.default_credits,
        "tool_prices": s.tool_prices, "status": s.status.as_str(),
        "first_party": s.first_party, "owner_id": s.owner_id, "tools": tools,
        "created_at": s.created_at / 1000, "updated_at": s.updated_at / 1000})
}

fn price(m: &Map<String, Value>, cap: Option<u64>) -> Result<i64, GatewayError> {
    credits("default_credits", m.get("default_credits"), cap)
}

/// A price in whole credits (`field` names it in the error): 0 or more, at most `cap` for a
/// third-party server.
fn credits(field: &str, v: Option<&Value>, cap: Option<u64>) -> Result<i64, GatewayError> {
    let bad = |what: String| GatewayError::invalid(format!("{field}: {what}"));
    let Some(p) = v.and_then(Value::as_u64).filter(|p| *p <= 1_000_000) else {
        return Err(bad("must be a whole number of credits, 0 or more".into()));
    };
    if let Some(cap) = cap.filter(|c| p > *c) {
        return Err(bad(format!(
            "must be at most {cap} for a third-party tool server"
        )));
    }
    Ok(p as i64)
}

/// `tool_prices`: absent (`None`), `null` (`Some` of none: every tool at the service's price),
/// or an object of tool name to whole credits. The names are checked by [`known_tools`] once
/// the tool list is known.
fn tool_prices(
    m: &Map<String, Value>,
    cap: Option<u64>,
) -> Result<Option<BTreeMap<String, i64>>, GatewayError> {
    let o = match m.get("tool_prices") {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(BTreeMap::new())),
        Some(Value::Object(o)) if o.len() <= 1024 => o,
        Some(_) => {
            return Err(GatewayError::invalid(
                "tool_prices: must be an object of tool name to whole credits per call (at most 1024), or null",
            ))
        }
    };
    let mut out = BTreeMap::new();
    for (tool, v) in o {
        out.insert(
            tool.clone(),
            credits(&format!("tool_prices.{tool}"), Some(v), cap)?,
        );
    }
    Ok(Some(out))
}

/// Every tool priced is one of the server's `tools` (a checked tools/list array).
fn known_tools(prices: &BTreeMap<String, i64>, tools: &Value) -> Result<(), GatewayError> {
    let names: Vec<&str> = tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    match prices.keys().find(|t| !names.contains(&t.as_str())) {
        Some(t) => Err(GatewayError::invalid(format!(
            "tool_prices.{t}: the tool server offers no tool `{t}` (it offers {})",
            names.join(", ")
        ))),
        None => Ok(()),
    }
}

fn url(m: &Map<String, Value>) -> Result<String, GatewayError> {
    let u = body::string(m, "upstream_url")?;
    if !(u.starts_with("http://") || u.starts_with("https://")) || u.len() > 2048 {
        return Err(GatewayError::invalid(
            "upstream_url: must be an http:// or https:// URL of at most 2048 bytes",
        ));
    }
    crate::config::EndpointUrl::parse(u)
        .map_err(|e| GatewayError::invalid(format!("upstream_url: {e}")))?;
    Ok(u.to_owned())
}

/// `POST /api/v1/mcp/services` (key or session) and, with `first_party`, the admin's
/// `POST /api/v1/admin/mcp/services` (naming the owning account; no price cap).
pub async fn register(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    owner: Option<&str>,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load_full();
    let m = body::json_object(session, MAX_BODY, rt.config.timeouts.request_body).await?;
    let first_party = owner.is_none();
    let owner = match owner {
        Some(o) => o.to_owned(),
        None => body::string(&m, "owner_id")?.to_owned(),
    };
    let slug = body::string(&m, "slug")?;
    if !valid_slug(slug) {
        return Err(GatewayError::invalid(
            "slug: must match ^[a-z0-9][a-z0-9-]{1,62}$ (lower-case letters, digits and dashes)",
        ));
    }
    let cap = (!first_party).then_some(rt.config.mcp.max_third_party_credits);
    let price = price(&m, cap)?;
    let prices = tool_prices(&m, cap)?.unwrap_or_default();
    let upstream_url = url(&m)?;
    let name = body::opt_string(&m, "name")?.map(str::to_owned);
    let description = body::opt_string(&m, "description")?.map(str::to_owned);
    for (f, v) in [("name", &name), ("description", &description)] {
        if v.as_ref().is_some_and(|v| v.len() > 4096) {
            return Err(GatewayError::invalid(format!(
                "{f}: must be at most 4096 bytes"
            )));
        }
    }
    let ledger = shared.ledger()?;
    if ledger.account(&owner).await?.is_none() {
        return Err(GatewayError::invalid("owner_id: no such account"));
    }
    if ledger.service(slug).await?.is_some() {
        return Err(GatewayError::new(
            ErrorKind::Conflict,
            format!("slug: `{slug}` is taken"),
        ));
    }
    let tools = live_check(shared, &upstream_url).await?;
    known_tools(&prices, &tools)?;
    let now = crate::clock::now_ms();
    let service = Service {
        id: format!("svc_{}", crate::accounts::random_id(16)?),
        slug: slug.to_owned(),
        owner_id: owner,
        name,
        description,
        upstream_url,
        default_credits: price,
        status: ServiceState::Pending,
        first_party,
        tools,
        tool_prices: prices,
        created_at: now,
        updated_at: now,
    };
    if !ledger.create_service(&service).await? {
        return Err(GatewayError::new(
            ErrorKind::Conflict,
            format!("slug: `{slug}` is taken"),
        ));
    }
    shared
        .metrics
        .mcp_events
        .with_label_values(&[slug, "registered"])
        .inc();
    respond::json(session, ctx, 201, &service_json(&service), &[]).await;
    Ok(())
}

/// `GET /api/v1/mcp/services`: the caller's own services, never another's.
pub async fn list_own(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let owner = caller.account()?;
    let list = shared.ledger()?.services(Some(owner), None).await?;
    let data: Vec<Value> = list.iter().map(service_json).collect();
    respond::json(session, ctx, 200, &json!({"data": data}), &[]).await;
    Ok(())
}

/// `PATCH /api/v1/mcp/services/{slug}`: the owner changes the price, the per-tool prices
/// (replaced whole) and/or the URL (a new URL is checked live again and sends the service back
/// to `pending`).
pub async fn update(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    slug: &str,
) -> Result<(), GatewayError> {
    let owner = caller.account()?.to_owned();
    let rt = shared.runtime.load_full();
    let m = body::json_object(session, MAX_BODY, rt.config.timeouts.request_body).await?;
    let ledger = shared.ledger()?;
    let not_found =
        || GatewayError::new(ErrorKind::NotFound, format!("no service `{slug}` of yours"));
    let current = ledger
        .service(slug)
        .await?
        .filter(|s| s.owner_id == owner)
        .ok_or_else(not_found)?;
    let cap = (!current.first_party).then_some(rt.config.mcp.max_third_party_credits);
    let price = match m.get("default_credits") {
        None | Some(Value::Null) => None,
        Some(_) => Some(self::price(&m, cap)?),
    };
    let prices = tool_prices(&m, cap)?;
    let new_url = match m.get("upstream_url") {
        None | Some(Value::Null) => None,
        Some(_) => Some(url(&m)?),
    };
    if price.is_none() && new_url.is_none() && prices.is_none() {
        return Err(GatewayError::invalid(
            "body: give default_credits, tool_prices and/or upstream_url",
        ));
    }
    let checked = match &new_url {
        Some(u) => Some((u.as_str(), live_check(shared, u).await?)),
        None => None,
    };
    if let Some(p) = &prices {
        known_tools(p, checked.as_ref().map_or(&current.tools, |(_, t)| t))?;
    }
    let change = ServiceChange {
        price,
        url: checked.as_ref().map(|(u, t)| (*u, t)),
        tool_prices: prices.as_ref(),
    };
    let now = crate::clock::now_ms();
    let s = ledger
        .update_service(slug, &owner, change, now)
        .await?
        .ok_or_else(not_found)?;
    shared.mcp.invalidate();
    respond::json(session, ctx, 200, &service_json(&s), &[]).await;
    Ok(())
}

/// `GET /api/v1/mcp/earnings`: credits earned from paid calls of the caller's services. They are
/// in the caller's balance already (each paid call credits it, with a `credit_ledger` entry).
pub async fn earnings(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let dev = caller.account()?;
    let ledger = shared.ledger()?;
    // Leased tool calls of this instance are written first, so the figures are exact here.
    drop(shared.leases.flush_all(ledger).await);
    let e = ledger.earnings(dev).await?;
    // Per service, each with its tools (the rows come ordered by service, then tool).
    let mut by_service: Vec<(&str, i64, i64, Vec<Value>)> = Vec::new();
    for (slug, tool, calls, earned) in &e.tools {
        let t = json!({"tool": tool, "calls": calls, "credits_earned": to_credits(*earned)});
        match by_service.last_mut().filter(|s| s.0 == slug) {
            Some(s) => {
                s.1 += calls;
                s.2 += earned;
                s.3.push(t);
            }
            None => by_service.push((slug, *calls, *earned, vec![t])),
        }
    }
    let services: Vec<Value> = by_service
        .into_iter()
        .map(|(slug, calls, earned, tools)| json!({"slug": slug, "calls": calls, "credits_earned": to_credits(earned), "tools": tools}))
        .collect();
    let recent: Vec<Value> = e
        .recent
        .iter()
        .map(|(id, slug, tool, earned, at)| json!({"request_id": id, "slug": slug, "tool": tool, "credits_earned": to_credits(*earned), "created_at": at / 1000}))
        .collect();
    let v = json!({"total_credits_earned": to_credits(e.total_credits), "total_calls": e.total_calls,
        "services": services, "recent": recent});
    respond::json(session, ctx, 200, &v, &[]).await;
    Ok(())
}
