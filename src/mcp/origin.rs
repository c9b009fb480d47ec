//! DNS-rebinding protection of the MCP endpoints (the MCP transport spec): a page on another
//! site cannot make a browser talk to them. A request whose `Origin` (when sent) is not the
//! gateway's own (`server.public_url`) or one of `[mcp] allowed_origins`, or whose `Host` is
//! not the public URL's, the listen address, a loopback name on the listen port or one of
//! `[mcp] allowed_hosts`, is 403. `"*"` in either list turns that check off (a deployment
//! whose clients reach it by addresses nobody can list).

use crate::request::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::config::Config;

/// 403 for a request the MCP endpoints must not serve.
pub fn check(config: &Config, session: &Session) -> Result<(), GatewayError> {
    let req = session.req_header();
    let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok());
    let public = config.server.public_url.trim_end_matches('/');
    let mcp = &config.mcp;
    if let Some(origin) = header("origin") {
        let allowed = origin.eq_ignore_ascii_case(public)
            || mcp
                .allowed_origins
                .iter()
                .any(|o| o == "*" || o.eq_ignore_ascii_case(origin));
        if !allowed {
            return Err(GatewayError::new(
                ErrorKind::Forbidden,
                format!("origin `{origin}` may not call the MCP endpoints (server.public_url, [mcp] allowed_origins)"),
            ));
        }
    }
    if mcp.allowed_hosts.iter().any(|h| h == "*") {
        return Ok(());
    }
    let host = header("host").or_else(|| req.uri.authority().map(|a| a.as_str()));
    let Some(host) = host else {
        return Ok(());
    };
    let listen = config.server.listen.to_string();
    if !host_allowed(host, public, &listen, &mcp.allowed_hosts) {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            format!("host `{host}` is not this gateway's (server.public_url, [mcp] allowed_hosts)"),
        ));
    }
    Ok(())
}

/// Whether `host` (a `Host` header: name or address, with or without a port) is one the
/// gateway answers MCP on.
fn host_allowed(host: &str, public_url: &str, listen: &str, extra: &[String]) -> bool {
    let (scheme, authority) = public_url.split_once("://").unwrap_or(("http", public_url));
    let authority = authority.split('/').next().unwrap_or_default();
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    let with_port = |a: &str| -> String {
        let a = a.to_ascii_lowercase();
        // `[::1]:8080` and `name:8080` carry a port; `[::1]` and `name` do not.
        let has_port = a.rsplit_once(':').is_some_and(|(h, p)| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.contains(':') || h.ends_with(']'))
        });
        if has_port {
            a
        } else {
            format!("{a}:{default_port}")
        }
    };
    let host = with_port(host);
    if host == with_port(authority) || extra.iter().any(|h| with_port(h) == host) {
        return true;
    }
    let listen = listen.to_ascii_lowercase();
    if host == listen {
        return true;
    }
    let port = listen.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|name| host == format!("{name}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn the_public_name_the_listen_address_and_loopback_names_are_allowed() {
        let public = "https://gw.example.com";
        let listen = "0.0.0.0:8080";
        for ok in [
            "gw.example.com",
            "GW.example.com:443",
            "0.0.0.0:8080",
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
        ] {
            assert!(host_allowed(ok, public, listen, &[]), "{ok}");
        }
        for bad in [
            "evil.example",
            "gw.example.com:8443",
            "localhost:9999",
            "127.0.0.1",
            "gw.example.com.evil.example",
        ] {
            assert!(!host_allowed(bad, public, listen, &[]), "{bad}");
        }
        assert!(host_allowed(
            "10.0.0.5:8080",
            public,
            listen,
            &["10.0.0.5:8080".into()]
        ));
        assert!(host_allowed(
            "internal",
            "http://127.0.0.1:8080",
            listen,
            &["internal".into()]
        ));
    }
}
