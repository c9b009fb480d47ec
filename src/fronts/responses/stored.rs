//! Stored responses: the `previous_response_id` chain read back into a conversation, and
//! `GET`/`DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`. Every read is for
//! the caller's account: another account's id is 404, as one that never existed.

use crate::request::Session;
use serde_json::{json, Value};
use tollgate_filters::responses::items::MAX_ITEMS;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::ledger::Ledger;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::{Runtime, Shared};

/// The longest `previous_response_id` chain followed.
const MAX_CHAIN: usize = 1_000;

fn not_found(id: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!("no response with id `{id}` for this account"),
    )
}

/// The items of the chain that ends at `previous` (inputs and outputs of each response, oldest
/// first), for the conversation of the next request.
pub async fn history(
    ledger: &Ledger,
    account: &str,
    previous: &str,
    now: i64,
    rt: &Runtime,
) -> Result<Vec<Value>, GatewayError> {
    let mut links: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
    let mut next = Some(previous.to_owned());
    let mut count = 0usize;
    while let Some(id) = next {
        if links.len() >= MAX_CHAIN {
            return Err(GatewayError::invalid(format!(
                "previous_response_id: the chain is longer than {MAX_CHAIN} responses"
            )));
        }
        let Some(row) = ledger.response(account, &id, now).await? else {
            if links.is_empty() {
                return Err(GatewayError::new(
                    ErrorKind::NotFound,
                    format!("previous_response_id: no response with id `{id}` for this account"),
                ));
            }
            return Err(GatewayError::invalid(format!(
                "previous_response_id: response `{id}`, which the chain needs, was deleted"
            )));
        };
        let (Some(items), Some(body)) = (row.input_items(), row.body()) else {
            let days = rt.config.responses.retention_secs / 86_400;
            return Err(GatewayError::invalid(format!(
                "previous_response_id: response `{id}`, which the chain needs, is no longer stored (responses are kept {days} days)"
            )));
        };
        let items: Vec<Value> = serde_json::from_str(items).unwrap_or_default();
        let body: Value = serde_json::from_str(body).unwrap_or_default();
        let output = body["output"].as_array().cloned().unwrap_or_default();
        count += items.len() + output.len();
        if count > MAX_ITEMS {
            return Err(GatewayError::invalid(
                "previous_response_id: the conversation holds too many items",
            ));
        }
        links.push((items, output));
        next = row.previous_response_id;
    }
    Ok(links
        .into_iter()
        .rev()
        .flat_map(|(items, output)| items.into_iter().chain(output))
        .collect())
}

/// `GET /v1/responses/{id}`.
pub async fn get(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let now = crate::clock::now_secs();
    let row = shared
        .ledger()?
        .response(caller.account()?, id, now)
        .await?;
    let Some(body) = row.as_ref().and_then(|r| r.body()) else {
        return Err(not_found(id));
    };
    let body = body.as_bytes().to_vec();
    respond::send(session, ctx, 200, "application/json", body, &[]).await;
    Ok(())
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    if !shared
        .ledger()?
        .delete_response(caller.account()?, id)
        .await?
    {
        return Err(not_found(id));
    }
    let body = json!({"id": id, "object": "response.deleted", "deleted": true});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// `GET /v1/responses/{id}/input_items?limit=&order=&after=`: newest first by default, as
/// OpenAI lists them.
pub async fn input_items(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    let q = Query::parse(session.req_header().uri.query().unwrap_or(""))?;
    let now = crate::clock::now_secs();
    let row = shared
        .ledger()?
        .response(caller.account()?, id, now)
        .await?;
    let Some(items) = row.as_ref().and_then(|r| r.input_items()) else {
        return Err(not_found(id));
    };
    let mut items: Vec<Value> = serde_json::from_str(items).unwrap_or_default();
    if q.descending {
        items.reverse();
    }
    if let Some(after) = &q.after {
        match items.iter().position(|i| i["id"].as_str() == Some(after)) {
            Some(at) => {
                items.drain(..=at);
            }
            None => {
                return Err(GatewayError::invalid(format!(
                    "after: no item `{after}` in this response's input"
                )))
            }
        }
    }
    let has_more = items.len() > q.limit;
    items.truncate(q.limit);
    let first = items
        .first()
        .map(|i| i["id"].clone())
        .unwrap_or(Value::Null);
    let last = items.last().map(|i| i["id"].clone()).unwrap_or(Value::Null);
    let body = json!({"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": has_more});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

struct Query {
    limit: usize,
    descending: bool,
    after: Option<String>,
}

impl Query {
    fn parse(query: &str) -> Result<Query, GatewayError> {
        let mut q = Query {
            limit: 20,
            descending: true,
            after: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "limit" => match v.parse::<usize>() {
                    Ok(n) if (1..=100).contains(&n) => q.limit = n,
                    _ => return Err(GatewayError::invalid("limit: must be from 1 to 100")),
                },
                "order" => match v {
                    "asc" => q.descending = false,
                    "desc" => q.descending = true,
                    _ => return Err(GatewayError::invalid("order: must be asc or desc")),
                },
                "after" => q.after = Some(v.to_owned()),
                // `include[]` and other list parameters change nothing here.
                _ => {}
            }
        }
        Ok(q)
    }
}
