//! The authorization endpoint (`GET /oauth/authorize`) and the consent page's API
//! (`GET`/`POST /api/v1/oauth/authorize`). The endpoint checks the request and sends the
//! browser to the dashboard's consent page (`/dashboard/authorize`, same query), which signs
//! the account holder in when needed, shows the client, its redirect URI and the resource, and
//! posts the decision: a cookie-authenticated write under the dashboard's rules (JSON only,
//! `Origin` of the gateway), so another site cannot approve on the user's behalf.
//!
//! Requests are checked in RFC 6749's order: an unknown client or a redirect URI that is not
//! one of the client's exactly is answered here and never redirected (an open redirect
//! otherwise); any other fault goes back to the client's redirect URI as `error=…`.

use std::collections::HashMap;

use crate::request::Session;
use serde_json::{json, Value};
use tollgate_filters::{keys, GatewayError};

use super::error::{answer, Code, OAuthError};
use super::form;
use super::metadata::{base, resource_path};
use super::store::{self, Client, Grant};
use super::tokens::secret;
use crate::auth::caller::Caller;
use crate::ledger::Ledger;
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// An authorization request that passed every check.
pub struct Checked {
    pub client: Client,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub state: Option<String>,
    /// `/mcp` or `/mcp/{slug}`.
    pub resource: String,
}

/// A refused request, and where to tell the client (`None`: not to its redirect URI).
pub struct Refusal {
    pub error: OAuthError,
    pub back_to: Option<(String, Option<String>)>,
}

fn no_redirect(e: OAuthError) -> Refusal {
    Refusal {
        error: e,
        back_to: None,
    }
}

/// Checks an authorization request's parameters.
pub async fn check(
    ledger: &Ledger,
    base: &str,
    p: &HashMap<String, String>,
) -> Result<Checked, Refusal> {
    let get = |k: &str| p.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let client_id = get("client_id")
        .ok_or_else(|| no_redirect(OAuthError::request("`client_id` is required")))?;
    let client = store::client(ledger, client_id)
        .await
        .map_err(|e| no_redirect(e.into()))?
        .ok_or_else(|| {
            no_redirect(OAuthError::new(
                Code::InvalidClient,
                format!("no client `{client_id}` is registered; register at /oauth/register"),
            ))
        })?;
    let redirect_uri = match get("redirect_uri") {
        Some(u) if client.redirect_uris.iter().any(|r| r == u) => u.to_owned(),
        Some(u) => {
            return Err(no_redirect(OAuthError::request(format!(
                "redirect URI `{u}` is not one the client registered"
            ))))
        }
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        None => {
            return Err(no_redirect(OAuthError::request(
                "`redirect_uri` is required: the client registered several",
            )))
        }
    };
    let state = get("state").map(str::to_owned);
    let back = |e: OAuthError| Refusal {
        error: e,
        back_to: Some((redirect_uri.clone(), state.clone())),
    };
    match get("response_type") {
        Some("code") => {}
        Some(t) => {
            return Err(back(OAuthError::new(
                Code::UnsupportedResponseType,
                format!("response_type `{t}` is not offered: code only"),
            )))
        }
        None => {
            return Err(back(OAuthError::request(
                "`response_type=code` is required",
            )))
        }
    }
    match get("code_challenge_method") {
        Some("S256") => {}
        Some(m) => {
            return Err(back(OAuthError::request(format!(
                "code_challenge_method `{m}` is refused: S256 only"
            ))))
        }
        None => {
            return Err(back(OAuthError::request(
                "PKCE is required: send code_challenge and code_challenge_method=S256",
            )))
        }
    }
    let challenge = get("code_challenge").unwrap_or("");
    let well_formed = challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !well_formed {
        return Err(back(OAuthError::request(
            "`code_challenge` must be the 43-character base64url SHA-256 of the verifier",
        )));
    }
    let resource = match get("resource") {
        None => "/mcp".to_owned(),
        Some(r) => resource_path(base, r).ok_or_else(|| {
            back(OAuthError::new(Code::InvalidTarget, format!("resource `{r}` is not one of this gateway's MCP endpoints ({base}/mcp or {base}/mcp/{{slug}})")))
        })?,
    };
    Ok(Checked {
        client,
        redirect_uri: redirect_uri.clone(),
        code_challenge: challenge.to_owned(),
        state,
        resource,
    })
}

fn query(session: &Session) -> Result<HashMap<String, String>, OAuthError> {
    form::parse(session.req_header().uri.query().unwrap_or(""))
}

/// `GET /oauth/authorize`: on to the consent page, or the refusal.
pub async fn start(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let raw = session.req_header().uri.query().unwrap_or("").to_owned();
    let checked = match query(session) {
        Ok(p) => check(shared.ledger()?, &base(shared), &p).await,
        Err(e) => Err(no_redirect(e)),
    };
    match checked {
        Ok(_) => redirect(session, ctx, format!("/dashboard/authorize?{raw}")).await,
        Err(Refusal {
            error,
            back_to: Some((uri, state)),
        }) => redirect(session, ctx, refusal_url(&uri, &error, state.as_deref())).await,
        Err(Refusal {
            error,
            back_to: None,
        }) => answer(session, ctx, Err(error)).await?,
    }
    Ok(())
}

fn refusal_url(uri: &str, e: &OAuthError, state: Option<&str>) -> String {
    let mut pairs = vec![
        ("error", e.code.as_str()),
        ("error_description", e.description.as_str()),
    ];
    if let Some(s) = state {
        pairs.push(("state", s));
    }
    form::with_query(uri, &pairs)
}

async fn redirect(session: &mut Session, ctx: &mut RequestCtx, to: String) {
    let extra = [("Location", to), ("Cache-Control", "no-store".to_owned())];
    respond::send(
        session,
        ctx,
        302,
        "text/plain; charset=utf-8",
        Vec::new(),
        &extra,
    )
    .await;
}

/// The consent API's refusals in the gateway's own error shape (the dashboard reads that).
fn as_gateway(r: Refusal) -> GatewayError {
    GatewayError::invalid(format!(
        "{}: {}",
        r.error.code.as_str(),
        r.error.description
    ))
}

/// The account's live keys the grant may act as.
async fn live_keys(ledger: &Ledger, account: &str) -> Result<Vec<Value>, GatewayError> {
    let now = crate::clock::now_ms();
    let keys = ledger.list_keys(account).await?;
    Ok(keys
        .into_iter()
        .filter(|k| !k.revoked && k.expires_at.is_none_or(|t| t > now))
        .map(|k| json!({"id": k.id, "name": k.name, "prefix": k.prefix}))
        .collect())
}

/// `GET /api/v1/oauth/authorize?…`: what the consent page shows.
pub async fn describe(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account = caller.account()?;
    let ledger = shared.ledger()?;
    let p = query(session).map_err(|e| GatewayError::invalid(e.description))?;
    let base = base(shared);
    let c = check(ledger, &base, &p).await.map_err(as_gateway)?;
    let keys = match caller {
        Caller::Key(k) => vec![json!({"id": k.key_id})],
        _ => live_keys(ledger, account).await?,
    };
    let body = json!({
        "client": {"id": c.client.id, "name": c.client.name},
        "redirect_uri": c.redirect_uri,
        "resource": format!("{base}{}", c.resource),
        "keys": keys,
    });
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// `POST /api/v1/oauth/authorize`: the decision. `{approve, key_id?}` beside the request's
/// parameters; answers `{redirect_to}`, where the page sends the browser.
pub async fn decide(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account = caller.account()?.to_owned();
    let deadline = shared.runtime.load().config.timeouts.request_body;
    let m = body::json_object(session, 16 * 1024, deadline).await?;
    let mut p = HashMap::new();
    for (k, v) in &m {
        if let Value::String(s) = v {
            p.insert(k.clone(), s.clone());
        }
    }
    let approve = match m.get("approve") {
        Some(Value::Bool(b)) => *b,
        _ => return Err(GatewayError::invalid("approve: must be true or false")),
    };
    let ledger = shared.ledger()?;
    let c = check(ledger, &base(shared), &p).await.map_err(as_gateway)?;
    if !approve {
        let e = OAuthError::new(Code::AccessDenied, "the account holder denied the request");
        let to = refusal_url(&c.redirect_uri, &e, c.state.as_deref());
        respond::json(session, ctx, 200, &json!({"redirect_to": to}), &[]).await;
        return Ok(());
    }
    let key_id = key_for_grant(
        ledger,
        caller,
        &account,
        p.get("key_id").map(String::as_str),
        &c.client.name,
    )
    .await?;
    let code = secret("tgc_")?;
    let now = crate::clock::now_ms();
    let grant = Grant {
        id: format!("grant_{}", crate::auth::random_id(16)?),
        account_id: account,
        key_id,
        client_id: c.client.id.clone(),
        resource: c.resource.clone(),
        revoked: false,
    };
    let code_until = now + shared.runtime.load().config.oauth.code_ms;
    store::insert_grant_with_code(
        ledger,
        &grant,
        &keys::hash(&code),
        &c.redirect_uri,
        &c.code_challenge,
        now,
        code_until,
    )
    .await?;
    let mut pairs = vec![("code", code.as_str())];
    if let Some(s) = c.state.as_deref() {
        pairs.push(("state", s));
    }
    let to = form::with_query(&c.redirect_uri, &pairs);
    respond::json(
        session,
        ctx,
        200,
        &json!({"redirect_to": to, "grant_id": grant.id}),
        &[],
    )
    .await;
    Ok(())
}

/// The key a new grant acts as: one of the account's live keys the holder picked, or a new
/// key made for the client. A caller with an API key (no dashboard session) may only grant
/// as that very key: a key must not hand out a wider one of its account.
async fn key_for_grant(
    ledger: &Ledger,
    caller: &Caller,
    account: &str,
    picked: Option<&str>,
    client: &str,
) -> Result<String, GatewayError> {
    if let Caller::Key(k) = caller {
        return match picked {
            None => Ok(k.key_id.clone()),
            Some(id) if id == k.key_id => Ok(k.key_id.clone()),
            Some(_) => Err(GatewayError::invalid(
                "key_id: an API key may only grant access as itself",
            )),
        };
    }
    match picked.filter(|id| !id.is_empty() && *id != "new") {
        Some(id) => {
            let live = live_keys(ledger, account).await?;
            if live.iter().any(|k| k["id"] == id) {
                Ok(id.to_owned())
            } else {
                Err(GatewayError::invalid(format!(
                    "key_id: `{id}` is not a live key of this account"
                )))
            }
        }
        None => {
            let name: String = format!("OAuth: {client}").chars().take(64).collect();
            let (_secret, new) = crate::accounts::keys::new_key(&name)?;
            ledger
                .insert_key(account, &new, crate::clock::now_ms())
                .await?;
            Ok(new.id)
        }
    }
}
