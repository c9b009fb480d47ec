//! The active health check of a pool: an HTTP GET of the provider's health path on each
//! endpoint, with the provider's auth header, run by the health background service.

use std::time::Duration;

use pingora::lb::health_check::HttpHealthCheck;

use super::provider;
use crate::config::providers::HealthCheck;
use crate::config::{EndpointUrl, Provider};

/// The check for a pool whose endpoints share `first`'s scheme, host header and base path.
pub fn http_check(
    provider: &Provider,
    first: &EndpointUrl,
    hc: &HealthCheck,
) -> Result<HttpHealthCheck, String> {
    let mut check = HttpHealthCheck::new(&first.authority(), first.tls);
    let path = format!("{}{}", first.base_path, hc.path);
    check.req.set_uri(
        path.parse()
            .map_err(|_| format!("provider {}: bad health path", provider.name))?,
    );
    if let Some((name, value)) = provider::auth_header(provider) {
        check
            .req
            .insert_header(name, value)
            .map_err(|e| format!("provider {}: {e}", provider.name))?;
    }
    let t = Duration::from_millis(hc.timeout_ms);
    check.peer_template.options.connection_timeout = Some(t);
    check.peer_template.options.read_timeout = Some(t);
    check.consecutive_failure = 1;
    check.consecutive_success = 1;
    Ok(check)
}
