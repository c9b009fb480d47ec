//! The active health check of a pool: an HTTP GET of the provider's health path on each
//! endpoint, with the provider's auth header, run by the health background service. Each
//! endpoint is checked with its own `Host`, TLS name and base path: a pool may mix hosts (two
//! regions of one provider), and a check sent with another endpoint's name would test the
//! wrong virtual host or fail its certificate.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use pingora::lb::health_check::{HealthCheck as PingoraCheck, HttpHealthCheck};
use pingora::lb::Backend;
use pingora::protocols::l4::socket::SocketAddr as PingoraAddr;

use super::provider;
use crate::config::providers::HealthCheck;
use crate::config::{EndpointUrl, Provider};

/// One HTTP check per endpoint address, each built from that endpoint's URL.
pub struct PerEndpoint {
    checks: HashMap<SocketAddr, HttpHealthCheck>,
}

/// The check of a pool's endpoints (URL and the address it resolved to).
pub fn pool_check(
    provider: &Provider,
    endpoints: &[(EndpointUrl, SocketAddr)],
    hc: &HealthCheck,
) -> Result<PerEndpoint, String> {
    let mut checks = HashMap::new();
    for (url, addr) in endpoints {
        // Two URLs on one address are one backend to the balancer; the first one names it.
        if !checks.contains_key(addr) {
            checks.insert(*addr, http_check(provider, url, hc)?);
        }
    }
    Ok(PerEndpoint { checks })
}

#[async_trait]
impl PingoraCheck for PerEndpoint {
    async fn check(&self, target: &Backend) -> pingora::Result<()> {
        let check = match &target.addr {
            PingoraAddr::Inet(a) => self.checks.get(a),
            _ => None,
        };
        match check {
            Some(c) => c.check(target).await,
            None => Err(pingora::Error::explain(
                pingora::ErrorType::InternalError,
                "no health check for this endpoint",
            )),
        }
    }

    fn health_threshold(&self, _success: bool) -> usize {
        // One check flips an endpoint either way; passive ejection covers the flapping case.
        1
    }
}

fn http_check(
    provider: &Provider,
    url: &EndpointUrl,
    hc: &HealthCheck,
) -> Result<HttpHealthCheck, String> {
    let mut check = HttpHealthCheck::new(&url.authority(), url.tls);
    let path = format!("{}{}", url.base_path, hc.path);
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
    for (name, value) in provider::fixed_headers(provider) {
        check
            .req
            .insert_header(*name, *value)
            .map_err(|e| format!("provider {}: {e}", provider.name))?;
    }
    let t = Duration::from_millis(hc.timeout_ms);
    check.peer_template.options.connection_timeout = Some(t);
    check.peer_template.options.read_timeout = Some(t);
    check.consecutive_failure = 1;
    check.consecutive_success = 1;
    Ok(check)
}
