//! `GET /v1/models`, `GET /v1/models/pricing` and `GET /v1/models/changelog`: every name a
//! client may send, the rates, and the scheduled changes.
//! All are open to guests (the lists counted against the guest limit), keys and dashboard
//! sessions.

use crate::request::Session;
use serde_json::{json, Value};
use tollgate_filters::route::{Catalog, ModelKind, Target, Tier};
use tollgate_filters::time::format_date;
use tollgate_filters::GatewayError;

use crate::auth::allowlist;
use crate::auth::caller::Caller;
use crate::config::ProviderKind;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// Which list.
#[derive(Debug, Clone, Copy)]
pub enum Listing {
    Models,
    Pricing,
    Changelog,
}

/// Serves a list (a guest's request was counted against the guest limit by the route table).
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    listing: Listing,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let now = crate::clock::now_secs();
    let body = match listing {
        Listing::Models => {
            let demo: Vec<&str> = rt
                .config
                .providers
                .iter()
                .filter(|p| p.kind == ProviderKind::Demo)
                .map(|p| p.name.as_str())
                .collect();
            list(&rt.config.catalog, now, shared.started, &demo)
        }
        Listing::Pricing => pricing(&rt.config.catalog, now),
        Listing::Changelog => {
            json!({"object": "list", "data": tollgate_filters::changelog::entries(&rt.config.catalog, now)})
        }
    };
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// `GET /v1/models`: every name the caller may send; a key with an allowlist sees only the
/// names that lead to its models.
pub async fn models(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load();
    let now = crate::clock::now_secs();
    let catalog = &rt.config.catalog;
    let ids = match caller {
        Caller::Key(k) => allowlist::of_key(catalog, k, now),
        _ => None,
    };
    let Some(ids) = ids else {
        return handle(shared, session, ctx, Listing::Models).await;
    };
    let demo: Vec<&str> = rt
        .config
        .providers
        .iter()
        .filter(|p| p.kind == ProviderKind::Demo)
        .map(|p| p.name.as_str())
        .collect();
    let mut body = list(catalog, now, shared.started, &demo);
    if let Some(data) = body["data"].as_array_mut() {
        data.retain(|m| {
            let name = m["id"].as_str().unwrap_or("");
            match catalog.resolve(name, now).map(|r| r.target) {
                Ok(Target::Model(i)) => ids.contains(&i),
                Ok(Target::Tier(t)) => ids.iter().any(|&i| catalog.model(i).tier == t),
                Err(_) => false,
            }
        });
    }
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// Rates are integer micro-credits inside; the edge shows credits as numbers.
fn credits(micros: u64) -> Value {
    json!(micros as f64 / 1_000_000.0)
}

/// OpenAI's list shape. Pinned ids, then aliases, then tier names, so that a client listing
/// models finds every name it may send. Models of a `demo` provider say so (`owned_by`,
/// `demo`, `description`).
pub fn list(catalog: &Catalog, now: i64, created: i64, demo: &[&str]) -> Value {
    let mut data = Vec::new();
    for m in catalog.models().iter().filter(|m| !m.retired(now)) {
        if demo.contains(&m.provider.as_str()) {
            data.push(json!({"id": m.id, "object": "model", "created": created, "owned_by": "tollgate-demo",
                             "demo": true, "description": "Tollgate's demo model: canned replies, no provider key or network"}));
            continue;
        }
        data.push(
            json!({"id": m.id, "object": "model", "created": created, "owned_by": m.provider}),
        );
    }
    for (alias, target) in catalog.aliases_at(now) {
        data.push(json!({"id": alias, "object": "model", "created": created, "owned_by": "tollgate", "alias_of": target}));
    }
    for t in Tier::ALL {
        if catalog
            .models()
            .iter()
            .any(|m| m.kind == ModelKind::Chat && m.tier == t && !m.retired(now))
        {
            data.push(json!({"id": t.as_str(), "object": "model", "created": created, "owned_by": "tollgate"}));
        }
    }
    json!({"object": "list", "data": data})
}

pub fn pricing(catalog: &Catalog, now: i64) -> Value {
    let data: Vec<Value> = catalog
        .models()
        .iter()
        .filter(|m| !m.retired(now))
        .map(|m| {
            // What a cached prompt token costs, as settlement prices it: each cache rate falls
            // back to the one it defaults to.
            let read = m.cache_read_micros_per_1k.unwrap_or(m.input_micros_per_1k);
            let write = m.cache_write_micros_per_1k.unwrap_or(m.input_micros_per_1k);
            let write_1h = m.cache_write_1h_micros_per_1k.unwrap_or(write);
            json!({
                "id": m.id,
                "provider": m.provider,
                // An embedding model has no tier: a tier picks chat models.
                "kind": match m.kind { ModelKind::Chat => "chat", ModelKind::Embedding => "embedding" },
                "tier": (m.kind == ModelKind::Chat).then(|| m.tier.as_str()),
                "aliases": catalog.aliases_at(now).into_iter().filter(|(_, t)| *t == m.id).map(|(a, _)| a).collect::<Vec<_>>(),
                "input_credits_per_1k": credits(m.input_micros_per_1k),
                "output_credits_per_1k": credits(m.output_micros_per_1k),
                "cached_input_credits_per_1k": credits(read),
                "cache_write_credits_per_1k": credits(write),
                "cache_write_1h_credits_per_1k": credits(write_1h),
                "max_output_tokens": m.max_output_tokens,
                "guest": m.guest,
                "deprecated_at": m.deprecated_at.map(format_date),
                "retires_at": m.retires_at.map(format_date),
                "replacement": m.replacement,
            })
        })
        .collect();
    json!({"object": "list", "data": data})
}
