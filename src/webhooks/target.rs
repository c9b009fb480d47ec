//! An endpoint's address: an http(s) URL whose host resolves only to addresses the SSRF rule
//! allows (the tool servers' rule, `tollgate_filters::mcp::private_reason`: private, loopback,
//! link-local, unique-local, multicast, unspecified and cloud-metadata addresses refused
//! unless `[webhooks] allow_private_targets`). Checked at registration and again before each
//! delivery, which connects to the address checked.

use std::net::SocketAddr;
use std::time::Duration;

use tollgate_filters::mcp::private_reason;

use crate::config::EndpointUrl;

/// The longest endpoint URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// The URL's shape: http(s), a host, no user info, no fragment, printable; its parsed origin.
pub fn parse(url: &str) -> Result<EndpointUrl, String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("must be at most {MAX_URL_LEN} characters"));
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("must not contain spaces or control characters".into());
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must be an http:// or https:// URL")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('@') {
        return Err("must not carry a user name or password".into());
    }
    if rest[end..].contains('#') {
        return Err("must not have a fragment".into());
    }
    let origin = &url[..url.len() - rest.len() + end];
    EndpointUrl::parse(origin).map_err(|e| e.to_string())
}

/// Resolves the URL's host within `timeout` and checks every address it has; the first, to
/// connect to.
pub async fn resolve(
    url: &str,
    allow_private: bool,
    timeout: Duration,
) -> Result<SocketAddr, String> {
    let parsed = parse(url)?;
    let lookup = tokio::net::lookup_host((parsed.host.clone(), parsed.port));
    let addrs: Vec<SocketAddr> = match tokio::time::timeout(timeout, lookup).await {
        Ok(Ok(a)) => a.collect(),
        Ok(Err(e)) => return Err(format!("its host does not resolve ({e})")),
        Err(_) => return Err("its host did not resolve in time".into()),
    };
    let first = *addrs.first().ok_or("its host has no address")?;
    if !allow_private {
        for a in &addrs {
            if let Some(why) = private_reason(a.ip()) {
                return Err(format!(
                    "its host resolves to {why} ({}), which webhook endpoints may not use",
                    a.ip()
                ));
            }
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn only_plain_http_urls_pass() {
        assert!(parse("https://hooks.example.com/in?token=1").is_ok());
        assert!(parse("http://hooks.example.com:8080").is_ok());
        for bad in [
            "ftp://x",
            "hooks.example.com",
            "https://user:pw@hooks.example.com/",
            "https://hooks.example.com/#x",
            "https://hooks.example.com/a b",
            "https:///path",
            "https://h:notaport/",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
