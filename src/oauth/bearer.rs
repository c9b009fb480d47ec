//! Who calls an MCP endpoint (`/mcp`, `/mcp/{slug}`): an API key exactly as on every other
//! endpoint, or an OAuth access token issued for that endpoint, which acts as its grant's key
//! (plan, budget, allowlists and limits included). A 401 carries `WWW-Authenticate: Bearer
//! resource_metadata="…"` (MCP authorization; RFC 9728 5.1) so a client can discover where to
//! sign in, with `error="invalid_token"` when the credentials it sent were refused.

use crate::request::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use super::cache::is_access_token;
use super::metadata::{base, covers, www_authenticate};
use crate::auth::caller::{self, Caller};
use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

/// The `Bearer` value of the `Authorization` header, if that is what it holds.
fn bearer(session: &Session) -> Option<&str> {
    let v = session
        .req_header()
        .headers
        .get("authorization")?
        .to_str()
        .ok()?;
    v.strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .map(str::trim)
}

/// Whether the request carries credentials of any kind a key may come in.
fn presented(session: &Session) -> bool {
    let h = &session.req_header().headers;
    ["authorization", "x-api-key", "x-goog-api-key"]
        .iter()
        .any(|n| h.contains_key(*n))
}

/// The caller of the MCP endpoint at `path`, or 401 with the challenge set on `ctx`.
pub async fn caller(
    shared: &Shared,
    session: &Session,
    ctx: &mut RequestCtx,
    path: &str,
) -> Result<Caller, GatewayError> {
    let outcome = match bearer(session) {
        Some(token) if is_access_token(token) => {
            let ledger = shared.ledger()?;
            match shared.oauth_tokens.resolve(ledger, token).await {
                Ok(t) if covers(&t.resource, path) => Ok(Caller::Key(t.key)),
                Ok(t) => Err(GatewayError::new(
                    ErrorKind::Authentication,
                    format!("this access token was issued for {} only", t.resource),
                )),
                Err(e) => Err(e),
            }
        }
        _ => match caller::authenticate(shared, session, false).await {
            Ok(c @ Caller::Key(_)) => Ok(c),
            Ok(_) => Err(GatewayError::new(
                ErrorKind::Authentication,
                "this endpoint needs an API key or an OAuth access token: send Authorization: Bearer <API key>, or sign in through the OAuth metadata named in WWW-Authenticate",
            )),
            Err(e) => Err(e),
        },
    };
    if let Err(e) = &outcome {
        if e.kind == ErrorKind::Authentication {
            let why = presented(session).then_some(e.message.as_str());
            ctx.set_header(
                "WWW-Authenticate",
                www_authenticate(&base(shared), path, why),
            );
        }
    }
    outcome
}
