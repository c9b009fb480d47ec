//! DNS-rebinding protection of the MCP endpoints (the MCP transport spec): a page on another
//! site cannot make a browser talk to them. A request whose `Origin` (when sent) is not the
//! gateway's own (`server.public_url`) or one of `[mcp] allowed_origins`, or whose `Host` is
//! not the public URL's, the listen address, a loopback name on the listen port or one of
//! `[mcp] allowed_hosts`, is 403. `"*"` in either list turns that check off (a deployment
//! whose clients reach it by addresses nobody can list).

use crate::request::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use std::net::{IpAddr, SocketAddr};

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
    if !host_allowed(host, public, config.server.listen, &mcp.allowed_hosts) {
        return Err(GatewayError::new(
            ErrorKind::Forbidden,
            format!("host `{host}` is not this gateway's (server.public_url, [mcp] allowed_hosts)"),
        ));
    }
    Ok(())
}

/// Whether `host` (a `Host` header: name or address, with or without a port) is one the
/// gateway answers MCP on. Names compare without case, a missing port as the public URL's
/// scheme's default; nothing is allocated (this runs on every MCP request).
fn host_allowed(host: &str, public_url: &str, listen: SocketAddr, extra: &[String]) -> bool {
    let (scheme, authority) = public_url.split_once("://").unwrap_or(("http", public_url));
    let authority = authority.split('/').next().unwrap_or_default();
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        "443"
    } else {
        "80"
    };
    let (name, port) = name_and_port(host);
    let port = port.unwrap_or(default_port);
    let same = |other: &str| {
        let (n, p) = name_and_port(other);
        n.eq_ignore_ascii_case(name) && p.unwrap_or(default_port) == port
    };
    if same(authority) || extra.iter().any(|h| same(h)) {
        return true;
    }
    // The listen port as it is spelled (no leading zeros), as the string comparison this
    // replaced required.
    let plain = port.len() == 1 || !port.starts_with('0');
    if !plain || port.parse::<u16>().ok() != Some(listen.port()) {
        return false;
    }
    // The listen address itself (an IPv6 one in brackets, an IPv4 one without), or a loopback
    // name, on the listen port.
    let ip = match listen {
        SocketAddr::V6(_) => name.strip_prefix('[').and_then(|n| n.strip_suffix(']')),
        SocketAddr::V4(_) => Some(name),
    };
    ip.and_then(|ip| ip.parse::<IpAddr>().ok()) == Some(listen.ip())
        || ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
}

/// A `Host` value's name and port: `[::1]:8080` and `name:8080` carry a port; `[::1]` and
/// `name` do not.
fn name_and_port(a: &str) -> (&str, Option<&str>) {
    match a.rsplit_once(':') {
        Some((h, p))
            if !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.contains(':') || h.ends_with(']')) =>
        {
            (h, Some(p))
        }
        _ => (a, None),
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv6Addr, SocketAddr};

    use super::host_allowed;

    #[test]
    fn the_public_name_the_listen_address_and_loopback_names_are_allowed() {
        let public = "https://gw.example.com";
        let listen = SocketAddr::from(([0, 0, 0, 0], 8080));
        for ok in [
            "gw.example.com",
            "GW.example.com:443",
            "0.0.0.0:8080",
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST:8080",
        ] {
            assert!(host_allowed(ok, public, listen, &[]), "{ok}");
        }
        for bad in [
            "evil.example",
            "gw.example.com:8443",
            "localhost:9999",
            "127.0.0.1",
            "gw.example.com.evil.example",
            "0.0.0.0:8081",
            "0.0.0.0",
            "10.0.0.5:8080",
            "localhost:08080",
            "0.0.0.0:08080",
            "[0.0.0.0]:8080",
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
        // An IPv6 listen address, by its own spelling and on its port only.
        let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 9000));
        assert!(host_allowed("[::1]:9000", public, v6, &[]));
        assert!(host_allowed("localhost:9000", public, v6, &[]));
        assert!(!host_allowed("[::2]:9000", public, v6, &[]));
        assert!(!host_allowed("[::1]:9001", public, v6, &[]));
        let v6_80 = SocketAddr::from((Ipv6Addr::LOCALHOST, 80));
        assert!(host_allowed("[::1]", "http://gw.example.com", v6_80, &[]));
        assert!(!host_allowed("::1", "http://gw.example.com", v6_80, &[]));
        assert!(!host_allowed("[::1]:09000", public, v6, &[]));
    }
}
