//! Discovery: the protected-resource metadata of the MCP endpoints (RFC 9728) at
//! `/.well-known/oauth-protected-resource` and its path-suffixed forms, and this gateway's
//! authorization-server metadata (RFC 8414; also served as `openid-configuration`, where some
//! clients look first). Addresses are built on `server.public_url`, the one address the
//! dashboard's cookie and the MCP endpoints' origin check already trust: a deployment behind a
//! proxy sets it to the address clients use.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::GatewayError;

use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// The scope the metadata advertises; a token grants exactly what its key may do, so there is
/// one scope and it is not checked.
pub const SCOPE: &str = "mcp";

/// `server.public_url` without a trailing slash: the issuer, and the base of every address.
pub fn base(shared: &Shared) -> String {
    let rt = shared.runtime.load();
    rt.config.server.public_url.trim_end_matches('/').to_owned()
}

/// Where a resource's metadata is: the resource path (`/mcp`, `/mcp/{slug}`) as the suffix.
pub fn metadata_url(base: &str, resource_path: &str) -> String {
    format!("{base}/.well-known/oauth-protected-resource{resource_path}")
}

/// `WWW-Authenticate` of a 401 from an MCP endpoint (MCP authorization, RFC 9728 5.1); with
/// `error="invalid_token"` when credentials were sent but refused.
pub fn www_authenticate(base: &str, path: &str, invalid: Option<&str>) -> String {
    let mut v = format!(
        "Bearer resource_metadata=\"{}\", scope=\"{SCOPE}\"",
        metadata_url(base, path)
    );
    if let Some(why) = invalid {
        let why = why.replace(['"', '\\'], "'");
        v.push_str(&format!(
            ", error=\"invalid_token\", error_description=\"{why}\""
        ));
    }
    v
}

/// `GET /.well-known/oauth-protected-resource[/mcp[/{slug}]]`: the root form describes `/mcp`.
pub async fn protected_resource(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    slug: Option<&str>,
) -> Result<(), GatewayError> {
    let base = base(shared);
    let resource = match slug {
        Some(s) => format!("{base}/mcp/{s}"),
        None => format!("{base}/mcp"),
    };
    let body = json!({
        "resource": resource,
        "authorization_servers": [base],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "Tollgate MCP tool marketplace",
        "resource_documentation": format!("{base}/pricing"),
    });
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// `GET /.well-known/oauth-authorization-server` (and `/.well-known/openid-configuration`).
pub async fn authorization_server(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let base = base(shared);
    let body = json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "registration_endpoint": format!("{base}/oauth/register"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "service_documentation": format!("{base}/pricing"),
    });
    respond::json(session, ctx, 200, &body, &[]).await;
    Ok(())
}

/// The resource path an RFC 8707 `resource` names, when it is one of this gateway's MCP
/// endpoints (`{base}/mcp` or `{base}/mcp/{slug}`, a trailing slash allowed).
pub fn resource_path(base: &str, resource: &str) -> Option<String> {
    let (scheme, rest) = resource.split_once("://")?;
    let (bscheme, brest) = base.split_once("://")?;
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    if !scheme.eq_ignore_ascii_case(bscheme) || !authority.eq_ignore_ascii_case(brest) {
        return None;
    }
    let path = path.trim_end_matches('/');
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["mcp"] => Some("/mcp".into()),
        ["mcp", slug] if !slug.is_empty() && !slug.contains(['?', '#']) => {
            Some(format!("/mcp/{slug}"))
        }
        _ => None,
    }
}

/// Whether a token issued for `granted` (`/mcp` or `/mcp/{slug}`) may be used on `path`: a
/// grant for `/mcp` covers every MCP endpoint, one for a service only that service's.
pub fn covers(granted: &str, path: &str) -> bool {
    granted == path || (granted == "/mcp" && path.starts_with("/mcp/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_this_gateways_mcp_endpoints_only() {
        let b = "http://127.0.0.1:8080";
        assert_eq!(
            resource_path(b, "http://127.0.0.1:8080/mcp").as_deref(),
            Some("/mcp")
        );
        assert_eq!(
            resource_path(b, "HTTP://127.0.0.1:8080/mcp/").as_deref(),
            Some("/mcp")
        );
        assert_eq!(
            resource_path(b, "http://127.0.0.1:8080/mcp/s1").as_deref(),
            Some("/mcp/s1")
        );
        assert_eq!(resource_path(b, "http://evil.example/mcp"), None);
        assert_eq!(
            resource_path(b, "http://127.0.0.1:8080/v1/chat/completions"),
            None
        );
        assert_eq!(resource_path(b, "http://127.0.0.1:8080/mcp/a/b"), None);
        assert_eq!(resource_path(b, "http://127.0.0.1:8080"), None);
        assert!(covers("/mcp", "/mcp/s1") && covers("/mcp", "/mcp"));
        assert!(covers("/mcp/s1", "/mcp/s1") && !covers("/mcp/s1", "/mcp"));
        assert!(!covers("/mcp/s1", "/mcp/s2"));
    }

    #[test]
    fn the_challenge_names_the_metadata_and_why_a_token_was_refused() {
        let v = www_authenticate("https://g.example", "/mcp/x", None);
        assert_eq!(
            v,
            "Bearer resource_metadata=\"https://g.example/.well-known/oauth-protected-resource/mcp/x\", scope=\"mcp\""
        );
        let v = www_authenticate("https://g.example", "/mcp", Some("expired \"now\""));
        assert!(v.ends_with(", error=\"invalid_token\", error_description=\"expired 'now'\""));
    }
}
