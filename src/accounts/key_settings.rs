//! A key's settings as the keys API reads and shows them (`POST /api/v1/keys`, `PATCH
//! /api/v1/keys/{id}`, `GET /api/v1/keys`): expiry, model and tool allowlists, budget and
//! limits, payload logging, cache breakpoints, the response cache. Every field is checked before anything is written, so a bad one changes nothing.

use serde_json::{json, Map, Value};
use tollgate_filters::budget::Period;
use tollgate_filters::credits::{from_credits, to_credits};
use tollgate_filters::mcp::allowlist_entry;
use tollgate_filters::GatewayError;

use crate::ledger::{KeyChange, KeyRow};
use crate::runtime::Shared;

/// The settings a body may carry.
pub const FIELDS: [&str; 12] = [
    "expires_at",
    "allowed_models",
    "allowed_tools",
    "budget_credits",
    "budget_period",
    "requests_per_minute",
    "tokens_per_minute",
    "concurrent_requests",
    "log_payloads",
    "cache_breakpoints",
    "response_cache",
    "name",
];

/// The largest budget a key may have, in credits: far above any real one, below what the
/// counters could overflow at.
const MAX_BUDGET_CREDITS: f64 = 1e9;
/// The largest per-key limit.
const MAX_LIMIT: i64 = 1_000_000_000;

/// Reads the settings of `m` (any member not in [`FIELDS`] is refused).
pub async fn parse(
    shared: &Shared,
    m: &Map<String, Value>,
    now_ms: i64,
) -> Result<KeyChange, GatewayError> {
    if let Some(k) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(GatewayError::invalid(format!(
            "{k}: not a setting of a key ({})",
            FIELDS[..FIELDS.len() - 1].join(", ")
        )));
    }
    let listed = |l: Option<Option<Vec<String>>>| l.map(|l| l.map(|l| json!(l).to_string()));
    let mut change = KeyChange {
        expires_at: expiry(m, now_ms)?,
        allowed_models: listed(allowed_models(shared, m)?),
        allowed_tools: None,
        budget_micros: budget(m)?,
        budget_period: period(m)?,
        requests_per_minute: limit(m, "requests_per_minute")?,
        tokens_per_minute: limit(m, "tokens_per_minute")?,
        concurrent_requests: limit(m, "concurrent_requests")?,
        log_payloads: log_payloads(m)?,
        cache_breakpoints: switch(m, "cache_breakpoints")?,
        response_cache: switch(m, "response_cache")?,
    };
    // Last: the only check that reads the ledger.
    change.allowed_tools = listed(allowed_tools(shared, m).await?);
    Ok(change)
}

/// A key as the API shows it; `spent`: µcr spent this budget period (lifetime without a
/// budget).
pub fn show(k: &KeyRow, spent: Option<i64>, now_ms: i64) -> Value {
    let budget = k.limits.budget;
    json!({
        "id": k.id, "name": k.name, "prefix": k.prefix, "created_at": k.created_at / 1000,
        "organization_id": k.organization_id,
        "last_used_at": k.last_used_at.map(|t| t / 1000), "revoked": k.revoked,
        "expires_at": k.expires_at.map(|t| t / 1000), "allowed_models": k.allowed_models,
        "allowed_tools": k.allowed_tools,
        "budget_credits": budget.map(|b| to_credits(b.0)),
        "budget_period": budget.map(|b| b.1.as_str()),
        "budget_resets_at": budget.and_then(|b| b.1.next(now_ms)).map(|t| t / 1000),
        "spent_credits": spent.map(to_credits),
        "requests_per_minute": k.limits.requests_per_minute,
        "tokens_per_minute": k.limits.tokens_per_minute,
        "concurrent_requests": k.limits.concurrent_requests,
        "log_payloads": k.log_payloads,
        "cache_breakpoints": k.cache_breakpoints,
        "response_cache": k.response_cache,
    })
}

/// `expires_at`: absent (`None`), `null` (`Some(None)`: never), or Unix seconds in the future
/// (returned in milliseconds).
fn expiry(m: &Map<String, Value>, now_ms: i64) -> Result<Option<Option<i64>>, GatewayError> {
    match m.get("expires_at") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => match v.as_i64() {
            Some(s) if s.saturating_mul(1000) > now_ms => Ok(Some(Some(s.saturating_mul(1000)))),
            Some(_) => Err(GatewayError::invalid(
                "expires_at: must be in the future (Unix seconds)",
            )),
            None => Err(GatewayError::invalid(
                "expires_at: must be Unix seconds, or null for never",
            )),
        },
    }
}

/// `allowed_models`: absent, `null` (every model), or a non-empty array of ids, aliases or
/// tiers the catalog knows.
fn allowed_models(
    shared: &Shared,
    m: &Map<String, Value>,
) -> Result<Option<Option<Vec<String>>>, GatewayError> {
    let list = match m.get("allowed_models") {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(None)),
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= 256 => a,
        Some(_) => {
            return Err(GatewayError::invalid(
                "allowed_models: must be a non-empty array of model ids, aliases or tiers, or null for every model",
            ))
        }
    };
    let mut names = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        match v.as_str() {
            Some(s) if !s.is_empty() => names.push(s.to_owned()),
            _ => {
                return Err(GatewayError::invalid(format!(
                    "allowed_models[{i}]: must be a model name"
                )))
            }
        }
    }
    let rt = shared.runtime.load();
    if let Err(i) =
        crate::auth::allowlist::allowed(&rt.config.catalog, &names, crate::clock::now_secs())
    {
        return Err(GatewayError::invalid(format!(
            "allowed_models[{i}]: no model, alias or tier `{}`",
            names[i]
        )));
    }
    Ok(Some(Some(names)))
}

/// `allowed_tools`: absent, `null` (every tool), or a non-empty array of live tool servers'
/// slugs (every tool of one) and `slug__tool` names (one tool, which the server must offer).
async fn allowed_tools(
    shared: &Shared,
    m: &Map<String, Value>,
) -> Result<Option<Option<Vec<String>>>, GatewayError> {
    let list = match m.get("allowed_tools") {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(None)),
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= 256 => a,
        Some(_) => {
            return Err(GatewayError::invalid(
                "allowed_tools: must be a non-empty array of tool server slugs (`slug`) or tools (`slug__tool`), or null for every tool",
            ))
        }
    };
    let live = crate::tool_servers::live::services(shared).await?;
    let mut names = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let bad = |what: String| GatewayError::invalid(format!("allowed_tools[{i}]: {what}"));
        let entry = v.as_str().unwrap_or_default();
        let Some((slug, tool)) = allowlist_entry(entry) else {
            return Err(bad(
                "must be a tool server's slug or `slug__tool` for one of its tools".into(),
            ));
        };
        let Some(service) = live.iter().find(|s| s.slug == slug) else {
            return Err(bad(format!("no live tool server `{slug}`")));
        };
        if let Some(t) = tool.filter(|t| !service.has_tool(t)) {
            return Err(bad(format!("tool server `{slug}` offers no tool `{t}`")));
        }
        names.push(entry.to_owned());
    }
    Ok(Some(Some(names)))
}

/// `budget_credits`: a positive number of credits, or `null` for none.
fn budget(m: &Map<String, Value>) -> Result<Option<Option<i64>>, GatewayError> {
    match m.get("budget_credits") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => v
            .as_f64()
            .filter(|c| *c > 0.0 && *c <= MAX_BUDGET_CREDITS)
            .and_then(from_credits)
            .filter(|m| *m > 0)
            .map(|m| Some(Some(m)))
            .ok_or_else(|| {
                GatewayError::invalid(
                    "budget_credits: must be a number of credits above 0 and at most 1000000000, or null for no budget",
                )
            }),
    }
}

/// `budget_period`: `day`, `week`, `month` (UTC) or `lifetime` (also `null`).
fn period(m: &Map<String, Value>) -> Result<Option<Option<Period>>, GatewayError> {
    match m.get("budget_period") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => match v.as_str().and_then(Period::parse) {
            Some(Period::Lifetime) => Ok(Some(None)),
            Some(p) => Ok(Some(Some(p))),
            None => Err(GatewayError::invalid(
                "budget_period: must be day, week, month or lifetime",
            )),
        },
    }
}

/// A per-key limit: a whole number from 1, or `null` for none.
fn limit(m: &Map<String, Value>, field: &str) -> Result<Option<Option<i64>>, GatewayError> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => match v.as_i64() {
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(Some(Some(n))),
            _ => Err(GatewayError::invalid(format!(
                "{field}: must be a whole number from 1 to 1000000000, or null for no limit"
            ))),
        },
    }
}

/// `log_payloads`: `true` or `false` (its requests' bodies stored in the request log).
pub fn log_payloads(m: &Map<String, Value>) -> Result<Option<bool>, GatewayError> {
    match m.get("log_payloads") {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(GatewayError::invalid("log_payloads: must be true or false")),
    }
}

/// A switch of a key or a wallet (`cache_breakpoints`, `response_cache`): `true` or `false`.
pub fn switch(m: &Map<String, Value>, field: &str) -> Result<Option<bool>, GatewayError> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(GatewayError::invalid(format!(
            "{field}: must be true or false"
        ))),
    }
}
