//! `GET /api/v1/orgs/{id}/usage[?format=csv]`: an organization's usage over 30 days per member
//! and per key, as JSON or CSV. An owner or admin sees every member's; a member its own.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tollgate_filters::credits::to_credits;
use tollgate_filters::GatewayError;

use super::access;
use crate::auth::caller::Caller;
use crate::ledger::orgs::Role;
use crate::ledger::{KeyUsage, UsageAgg};
use crate::request::ctx::RequestCtx;
use crate::request::{respond, Session};
use crate::runtime::Shared;

const DAYS: i64 = 30;

/// Totals of one member.
#[derive(Default)]
struct Totals {
    requests: i64,
    prompt_tokens: i64,
    completion_tokens: i64,
    credits: i64,
}

impl Totals {
    fn add(&mut self, u: &UsageAgg) {
        self.requests += u.requests;
        self.prompt_tokens += u.prompt_tokens;
        self.completion_tokens += u.completion_tokens;
        self.credits += u.credits;
    }
}

pub async fn usage(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    org: &str,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (account, role) = access(shared, session, caller, org, Role::Member).await?;
    let csv = match session.req_header().uri.query() {
        None | Some("") => false,
        Some("format=csv") => true,
        Some("format=json") => false,
        Some(q) => {
            return Err(GatewayError::invalid(format!(
                "query: `{q}`: only format=csv or format=json"
            )))
        }
    };
    // This instance's metered rows first, so that the report includes them.
    drop(shared.leases.flush(ledger, org).await?);
    let since = crate::clock::now_ms() - DAYS * 86_400_000;
    let mut keys = ledger.usage_by_key(org, since).await?;
    if role == Role::Member {
        keys.retain(|k| k.owner.as_deref() == Some(account.as_str()));
    }
    let emails: BTreeMap<String, Option<String>> = ledger
        .members(org)
        .await?
        .into_iter()
        .map(|m| (m.account_id, m.email))
        .collect();
    let email = |owner: &Option<String>| {
        owner
            .as_ref()
            .and_then(|o| emails.get(o).cloned().flatten())
    };
    if csv {
        let body = as_csv(&keys, &email);
        let disposition = format!("attachment; filename=\"{org}-usage.csv\"");
        let extra: &[(&str, String)] = &[("Content-Disposition", disposition)];
        respond::send(
            session,
            ctx,
            200,
            "text/csv; charset=utf-8",
            body.into_bytes(),
            extra,
        )
        .await;
        return Ok(());
    }
    let mut members: BTreeMap<Option<String>, Totals> = BTreeMap::new();
    for k in &keys {
        members.entry(k.owner.clone()).or_default().add(&k.usage);
    }
    let by_member: Vec<Value> = members
        .iter()
        .map(|(owner, t)| {
            json!({"account_id": owner, "email": email(owner), "requests": t.requests,
                   "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens,
                   "credits": to_credits(t.credits)})
        })
        .collect();
    let by_key: Vec<Value> = keys
        .iter()
        .map(|k| {
            let u = &k.usage;
            json!({"key_id": u.key, "name": k.name, "account_id": k.owner, "requests": u.requests,
                   "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                   "credits": to_credits(u.credits)})
        })
        .collect();
    let member = (role == Role::Member).then_some(account.as_str());
    let savings = crate::accounts::usage::savings_json(ledger.savings(org, member, since).await?);
    let body = json!({"object": "organization.usage", "organization_id": org, "days": DAYS,
                      "by_member": by_member, "by_key": by_key, "savings": savings});
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// One line per key; fields quoted where they could hold a comma or a quote.
fn as_csv(keys: &[KeyUsage], email: &dyn Fn(&Option<String>) -> Option<String>) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut out = String::from(
        "key_id,key_name,account_id,email,requests,prompt_tokens,completion_tokens,credits\n",
    );
    for k in keys {
        let u = &k.usage;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            u.key,
            quote(&k.name),
            k.owner.as_deref().unwrap_or(""),
            quote(&email(&k.owner).unwrap_or_default()),
            u.requests,
            u.prompt_tokens,
            u.completion_tokens,
            to_credits(u.credits)
        ));
    }
    out
}
