//! Dynamic client registration (RFC 7591, `POST /oauth/register`): an MCP client registers a
//! name and its exact redirect URIs, and is given a `client_id`. Every client is a public
//! client (PKCE is its proof, no secret): `token_endpoint_auth_method` is always `none`.
//!
//! Redirect URIs (RFC 8252, OAuth 2.1): `https://` with a host; `http://` only to the loopback
//! (`localhost`, `127.0.0.1`, `[::1]`, any port), where native clients listen; or a native
//! app's private-use scheme (`cursor://…`, `com.example.app:/cb`). Never a fragment, never a
//! scheme a browser runs or reads locally (`javascript:`, `data:`, `file:`…).

use crate::request::Session;
use serde_json::{json, Map, Value};
use tollgate_filters::GatewayError;

use super::error::{answer, Code, OAuthError};
use super::store::{self, Client};
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

const MAX_BODY: usize = 16 * 1024;
const MAX_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
const MAX_NAME_CHARS: usize = 100;

/// Schemes that are not a native app's: a browser would run, read or fetch them itself.
const FORBIDDEN_SCHEMES: &[&str] = &[
    "javascript",
    "data",
    "file",
    "vbscript",
    "about",
    "blob",
    "ftp",
    "ws",
    "wss",
    "mailto",
];

/// Why `uri` may not be a redirect URI, or `None` when it may.
pub fn redirect_uri_problem(uri: &str) -> Option<&'static str> {
    if uri.len() > MAX_URI_LEN {
        return Some("is too long");
    }
    if uri.contains('#') {
        return Some("must not have a fragment");
    }
    if uri
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Some("must not contain spaces or control characters");
    }
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Some("must be an absolute URI");
    };
    let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid_scheme {
        return Some("must be an absolute URI");
    }
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest
        .strip_prefix("//")
        .map(|r| r.split(['/', '?']).next().unwrap_or(""));
    match scheme.as_str() {
        "https" => match authority {
            Some(a) if !host_of(a).is_empty() && !a.contains('@') => None,
            _ => Some("must name a host"),
        },
        "http" => match authority.map(host_of) {
            Some("localhost" | "127.0.0.1" | "[::1]") if !rest.contains('@') => None,
            _ => Some("may use http only on the loopback (localhost, 127.0.0.1, [::1]); use https"),
        },
        s if FORBIDDEN_SCHEMES.contains(&s) => Some("uses a scheme that cannot be a redirect"),
        _ if rest.is_empty() || rest == "//" => Some("must have a path"),
        _ => None,
    }
}

/// The host of an authority (`host:port`, `[v6]:port`), lowercased for the checks above.
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or("");
    }
    authority.split(':').next().unwrap_or("")
}

/// A string array field, absent allowed.
fn strings<'a>(m: &'a Map<String, Value>, field: &str) -> Result<Option<Vec<&'a str>>, OAuthError> {
    let bad = || {
        OAuthError::new(
            Code::InvalidClientMetadata,
            format!("`{field}` must be an array of strings"),
        )
    };
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().ok_or_else(bad))
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(bad()),
    }
}

/// The client a registration body describes, checked.
pub fn client_of(m: &Map<String, Value>, id: String) -> Result<Client, OAuthError> {
    let uris = strings(m, "redirect_uris")?.unwrap_or_default();
    if uris.is_empty() {
        return Err(OAuthError::new(
            Code::InvalidRedirectUri,
            "`redirect_uris` must list at least one URI",
        ));
    }
    if uris.len() > MAX_URIS {
        return Err(OAuthError::new(
            Code::InvalidRedirectUri,
            format!("at most {MAX_URIS} redirect URIs"),
        ));
    }
    for u in &uris {
        if let Some(why) = redirect_uri_problem(u) {
            return Err(OAuthError::new(
                Code::InvalidRedirectUri,
                format!("redirect URI `{u}` {why}"),
            ));
        }
    }
    for g in strings(m, "grant_types")?.unwrap_or_default() {
        if !matches!(g, "authorization_code" | "refresh_token") {
            return Err(OAuthError::new(
                Code::InvalidClientMetadata,
                format!(
                    "grant type `{g}` is not offered: authorization_code and refresh_token only"
                ),
            ));
        }
    }
    for r in strings(m, "response_types")?.unwrap_or_default() {
        if r != "code" {
            return Err(OAuthError::new(
                Code::InvalidClientMetadata,
                format!("response type `{r}` is not offered: code only"),
            ));
        }
    }
    let name = match m.get("client_name") {
        None | Some(Value::Null) => "MCP client".to_owned(),
        Some(Value::String(s))
            if !s.trim().is_empty()
                && s.chars().count() <= MAX_NAME_CHARS
                && !s.chars().any(char::is_control) =>
        {
            s.trim().to_owned()
        }
        Some(_) => {
            return Err(OAuthError::new(
                Code::InvalidClientMetadata,
                format!("`client_name` must be a string of 1 to {MAX_NAME_CHARS} characters"),
            ))
        }
    };
    Ok(Client {
        id,
        name,
        redirect_uris: uris.into_iter().map(str::to_owned).collect(),
    })
}

pub async fn register(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let outcome = registration(shared, session).await;
    answer(session, ctx, outcome).await
}

async fn registration(shared: &Shared, session: &mut Session) -> Result<(u16, Value), OAuthError> {
    let deadline = shared.runtime.load().config.timeouts.request_body;
    let m = body::json_object(session, MAX_BODY, deadline)
        .await
        .map_err(|e| OAuthError::new(Code::InvalidClientMetadata, e.message))?;
    let client = client_of(&m, format!("mcpc_{}", crate::auth::random_id(24)?))?;
    let now = crate::clock::now_ms();
    store::insert_client(shared.ledger()?, &client, now).await?;
    Ok((
        201,
        json!({
            "client_id": client.id,
            "client_id_issued_at": now / 1000,
            "client_name": client.name,
            "redirect_uris": client.redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_loopback_http_or_a_native_scheme() {
        for ok in [
            "https://claude.ai/api/mcp/auth_callback",
            "http://localhost:33418/callback",
            "http://127.0.0.1/cb",
            "http://[::1]:9/cb",
            "cursor://anysphere.cursor-mcp/oauth/callback",
            "com.example.app:/oauth2redirect",
        ] {
            assert_eq!(redirect_uri_problem(ok), None, "{ok}");
        }
        for bad in [
            "http://example.com/cb",
            "http://localhost.evil.com/cb",
            "http://127.0.0.1@evil.com/cb",
            "https://good.example/cb#frag",
            "https:///cb",
            "javascript:alert(1)",
            "data:text/html,x",
            "file:///etc/passwd",
            "/relative",
            "no-scheme",
            "https://a b/cb",
        ] {
            assert!(redirect_uri_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn registration_bodies_are_checked_field_by_field() {
        let body = |v: Value| v.as_object().cloned().unwrap();
        let c = client_of(
            &body(json!({"redirect_uris": ["http://localhost:1/cb"], "client_name": " Cursor "})),
            "id".into(),
        )
        .unwrap();
        assert_eq!((c.name.as_str(), c.redirect_uris.len()), ("Cursor", 1));
        for (v, code) in [
            (json!({}), Code::InvalidRedirectUri),
            (json!({"redirect_uris": []}), Code::InvalidRedirectUri),
            (
                json!({"redirect_uris": "http://localhost/cb"}),
                Code::InvalidClientMetadata,
            ),
            (
                json!({"redirect_uris": ["http://evil.com/cb"]}),
                Code::InvalidRedirectUri,
            ),
            (
                json!({"redirect_uris": ["http://localhost/cb"], "grant_types": ["implicit"]}),
                Code::InvalidClientMetadata,
            ),
            (
                json!({"redirect_uris": ["http://localhost/cb"], "response_types": ["token"]}),
                Code::InvalidClientMetadata,
            ),
            (
                json!({"redirect_uris": ["http://localhost/cb"], "client_name": 7}),
                Code::InvalidClientMetadata,
            ),
        ] {
            assert_eq!(
                client_of(&body(v.clone()), "id".into()).unwrap_err().code,
                code,
                "{v}"
            );
        }
    }
}
