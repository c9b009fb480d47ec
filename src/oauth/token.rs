//! The token endpoint (`POST /oauth/token`): an authorization code with its PKCE verifier, or
//! a refresh token, for a new access token and refresh token; and revocation (RFC 7009,
//! `POST /oauth/revoke`). Bodies are `application/x-www-form-urlencoded` (RFC 6749).
//!
//! A code works once and for `[oauth] code_secs`; presented again, the grant it was issued for
//! is revoked (RFC 6749 4.1.2: the code leaked). A refresh token works once: using it rotates
//! it; presented again, the grant is revoked (OAuth 2.1 4.3.1: refresh token reuse detection).

use std::collections::HashMap;

use crate::request::Session;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tollgate_filters::keys::{self, constant_time_eq};
use tollgate_filters::GatewayError;

use super::error::{answer, Code, OAuthError};
use super::form;
use super::metadata::{base, resource_path, SCOPE};
use super::store::{self, CodeOutcome};
use super::tokens::{self, RefreshOutcome};
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

const MAX_BODY: usize = 16 * 1024;

/// The S256 challenge of a verifier (RFC 7636 4.2): base64url, no padding, of its SHA-256.
pub fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// RFC 7636 4.1: 43 to 128 unreserved characters.
fn verifier_well_formed(v: &str) -> bool {
    (43..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

async fn form_body(
    shared: &Shared,
    session: &mut Session,
) -> Result<HashMap<String, String>, OAuthError> {
    let form = session
        .req_header()
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .is_some_and(|t| {
            t.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form {
        return Err(OAuthError::request(
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    let deadline = shared.runtime.load().config.timeouts.request_body;
    let raw = body::read(session, MAX_BODY, deadline).await?;
    let text =
        std::str::from_utf8(&raw).map_err(|_| OAuthError::request("the body is not UTF-8"))?;
    form::parse(text)
}

fn required<'a>(f: &'a HashMap<String, String>, k: &str) -> Result<&'a str, OAuthError> {
    f.get(k)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| OAuthError::request(format!("`{k}` is required")))
}

pub async fn token(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let outcome = exchange(shared, session).await;
    answer(session, ctx, outcome).await
}

async fn exchange(shared: &Shared, session: &mut Session) -> Result<(u16, Value), OAuthError> {
    let f = form_body(shared, session).await?;
    let grant_id = match required(&f, "grant_type")? {
        "authorization_code" => by_code(shared, &f).await?,
        "refresh_token" => by_refresh(shared, &f).await?,
        other => {
            return Err(OAuthError::new(
                Code::UnsupportedGrantType,
                format!("grant_type `{other}` is not offered: authorization_code or refresh_token"),
            ))
        }
    };
    let oauth = shared.runtime.load().config.oauth;
    let now = crate::clock::now_ms();
    let ledger = shared.ledger()?;
    let pair = tokens::issue(
        ledger,
        &grant_id,
        now + oauth.access_token_ms,
        now + oauth.refresh_token_ms,
    )
    .await?;
    Ok((
        200,
        json!({
            "access_token": pair.access,
            "token_type": "Bearer",
            "expires_in": oauth.access_token_ms / 1000,
            "refresh_token": pair.refresh,
            "scope": SCOPE,
        }),
    ))
}

/// Revokes a grant whose code or refresh token was presented a second time.
async fn revoke_on_reuse(shared: &Shared, grant_id: &str, what: &str) -> OAuthError {
    if let Ok(ledger) = shared.ledger() {
        if let Err(e) = store::revoke_grant(ledger, grant_id, None, crate::clock::now_ms()).await {
            tracing::error!(
                grant = grant_id,
                "could not revoke a grant after {what} reuse: {e}"
            );
        }
    }
    shared.oauth_tokens.evict_grant(grant_id);
    OAuthError::grant(format!(
        "this {what} was already used; the grant it belongs to is revoked"
    ))
}

/// The grant, when it is live and the client's, and the `resource` (if sent) is its own.
async fn live_grant(
    shared: &Shared,
    f: &HashMap<String, String>,
    grant_id: &str,
    client_id: &str,
) -> Result<(), OAuthError> {
    let g = store::grant(shared.ledger()?, grant_id)
        .await?
        .ok_or_else(|| OAuthError::grant("no such grant"))?;
    if g.revoked {
        return Err(OAuthError::grant("the grant was revoked"));
    }
    if g.client_id != client_id {
        return Err(OAuthError::grant("this grant was issued to another client"));
    }
    if let Some(r) = f.get("resource").filter(|r| !r.is_empty()) {
        if resource_path(&base(shared), r).as_deref() != Some(g.resource.as_str()) {
            return Err(OAuthError::new(
                Code::InvalidTarget,
                format!("resource `{r}` is not the one this grant was approved for"),
            ));
        }
    }
    Ok(())
}

async fn by_code(shared: &Shared, f: &HashMap<String, String>) -> Result<String, OAuthError> {
    let code = required(f, "code")?;
    let client_id = required(f, "client_id")?;
    let verifier = required(f, "code_verifier")
        .map_err(|_| OAuthError::request("`code_verifier` is required (PKCE)"))?;
    if !verifier_well_formed(verifier) {
        return Err(OAuthError::request(
            "`code_verifier` must be 43 to 128 unreserved characters",
        ));
    }
    let now = crate::clock::now_ms();
    let used = match store::take_code(shared.ledger()?, &keys::hash(code), now).await? {
        CodeOutcome::Taken(u) => u,
        CodeOutcome::Reused(grant) => {
            return Err(revoke_on_reuse(shared, &grant, "authorization code").await)
        }
        CodeOutcome::Expired => {
            return Err(OAuthError::grant(
                "the authorization code expired; authorize again",
            ))
        }
        CodeOutcome::Unknown => return Err(OAuthError::grant("unknown authorization code")),
    };
    if f.get("redirect_uri")
        .is_some_and(|u| *u != used.redirect_uri)
    {
        return Err(OAuthError::grant(
            "`redirect_uri` is not the one of the authorization request",
        ));
    }
    if !constant_time_eq(s256(verifier).as_bytes(), used.code_challenge.as_bytes()) {
        return Err(OAuthError::grant(
            "`code_verifier` does not match the code_challenge (PKCE S256)",
        ));
    }
    live_grant(shared, f, &used.grant_id, client_id).await?;
    Ok(used.grant_id)
}

async fn by_refresh(shared: &Shared, f: &HashMap<String, String>) -> Result<String, OAuthError> {
    let presented = required(f, "refresh_token")?;
    let client_id = required(f, "client_id")?;
    let now = crate::clock::now_ms();
    let grant = match tokens::rotate_refresh(shared.ledger()?, &keys::hash(presented), now).await? {
        RefreshOutcome::Rotated(g) => g,
        RefreshOutcome::Reused(g) => return Err(revoke_on_reuse(shared, &g, "refresh token").await),
        RefreshOutcome::Expired => {
            return Err(OAuthError::grant(
                "the refresh token expired; authorize again",
            ))
        }
        RefreshOutcome::Unknown => return Err(OAuthError::grant("unknown refresh token")),
    };
    live_grant(shared, f, &grant, client_id).await?;
    Ok(grant)
}

/// `POST /oauth/revoke` (RFC 7009): revokes the grant the token belongs to (its access and
/// refresh tokens alike). An unknown token is answered 200 too, as the RFC asks.
pub async fn revoke(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let outcome = revocation(shared, session).await;
    answer(session, ctx, outcome).await
}

async fn revocation(shared: &Shared, session: &mut Session) -> Result<(u16, Value), OAuthError> {
    let f = form_body(shared, session).await?;
    let token = required(&f, "token")?;
    let ledger = shared.ledger()?;
    if let Some(grant_id) = tokens::grant_of(ledger, &keys::hash(token)).await? {
        let g = store::grant(ledger, &grant_id).await?;
        let client_matches = match (f.get("client_id"), &g) {
            (Some(c), Some(g)) => *c == g.client_id,
            _ => true,
        };
        if !client_matches {
            return Err(OAuthError::new(
                Code::UnauthorizedClient,
                "this token was issued to another client",
            ));
        }
        store::revoke_grant(ledger, &grant_id, None, crate::clock::now_ms()).await?;
        shared.oauth_tokens.evict_grant(&grant_id);
    }
    Ok((200, json!({})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_s256_challenge_is_rfc_7636s() {
        // RFC 7636 appendix B.
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert!(verifier_well_formed(&"a".repeat(43)));
        assert!(!verifier_well_formed(&"a".repeat(42)));
        assert!(!verifier_well_formed(&format!("{}!", "a".repeat(43))));
    }
}
