//! The active health check of a pool: an HTTP GET of the provider's health path on each
//! endpoint, with the provider's auth header, run by the health background service. Each
//! endpoint is checked with its own `Host`, TLS name and base path: a pool may mix hosts (two
//! regions of one provider), and a check sent with another endpoint's name would test the
//! wrong virtual host or fail its certificate.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use pingora::protocols::l4::socket::SocketAddr as PingoraAddr;
use pingora_load_balancing::health_check::{HealthCheck as PingoraCheck, HttpHealthCheck};
use pingora_load_balancing::Backend;

use super::provider;
use crate::config::providers::HealthCheck;
use crate::config::{EndpointUrl, Provider};

/// One HTTP check per endpoint address, each built from that endpoint's URL.
pub struct PerEndpoint {
    provider: String,
    checks: HashMap<SocketAddr, HttpHealthCheck>,
    /// Endpoints whose last check failed: a failure is logged when an endpoint turns
    /// unhealthy (with its reason, a TLS one included), a recovery when it comes back, not
    /// every interval.
    failing: Mutex<HashSet<SocketAddr>>,
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
    Ok(PerEndpoint {
        provider: provider.name.clone(),
        checks,
        failing: Mutex::default(),
    })
}

impl PerEndpoint {
    /// Logs a change of an endpoint's health: the reason when it fails (Pingora's own
    /// reports go to the `log` crate, which the gateway's log does not show).
    fn record(&self, addr: SocketAddr, result: &pingora::Result<()>) {
        let Ok(mut failing) = self.failing.lock() else {
            return;
        };
        match result {
            Err(e) if failing.insert(addr) => {
                tracing::warn!(provider = %self.provider, endpoint = %addr, "health check failed: {e}");
            }
            Ok(()) if failing.remove(&addr) => {
                tracing::info!(provider = %self.provider, endpoint = %addr, "health check passes again");
            }
            _ => {}
        }
    }
}

#[async_trait]
impl PingoraCheck for PerEndpoint {
    async fn check(&self, target: &Backend) -> pingora::Result<()> {
        let (addr, check) = match &target.addr {
            PingoraAddr::Inet(a) => (Some(*a), self.checks.get(a)),
            _ => (None, None),
        };
        let result = match check {
            Some(c) => c.check(target).await,
            None => Err(pingora::Error::explain(
                pingora::ErrorType::InternalError,
                "no health check for this endpoint",
            )),
        };
        if let Some(addr) = addr {
            self.record(addr, &result);
        }
        result
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
    // `Host` names the port when it is not the scheme's; the TLS server name never does
    // (rustls refuses `host:port` before a byte is sent), so it is set apart, as the request
    // path sets it (`upstream::pool`).
    let mut check = HttpHealthCheck::new(&url.authority(), url.tls);
    if url.tls {
        check.peer_template.sni = url.host.clone();
        // Verified as requests are (`Pool::peer`): the provider's `ca_file` roots and client
        // certificate, with Pingora's `verify_cert` and `verify_hostname` left on.
        check.peer_template.options.ca = provider.tls.ca.clone();
        check.peer_template.client_cert_key = provider.tls.client_cert_key.clone();
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Provider {
        Provider {
            responses_api: false,
            continuation: tollgate_filters::resume::request::Continuation::Prompt,
            name: "vllm".into(),
            kind: crate::config::ProviderKind::OpenAi,
            endpoints: vec![],
            api_key: None,
            health_check: None,
            self_hosted: false,
            eject_after_failures: 3,
            eject_for: Duration::from_secs(1),
            tls: Default::default(),
            cache_ttl: Duration::from_secs(600),
        }
    }

    fn hc() -> HealthCheck {
        HealthCheck {
            path: "/v1/models".into(),
            interval_ms: 1000,
            timeout_ms: 500,
        }
    }

    #[test]
    fn an_https_endpoint_on_another_port_is_checked_with_the_host_as_its_server_name() {
        let url = EndpointUrl::parse("https://vllm.internal:8443/base").unwrap();
        let c = http_check(&provider(), &url, &hc()).unwrap();
        assert_eq!(c.peer_template.sni, "vllm.internal");
        // The certificate and its name are checked, as on the request path.
        assert!(c.peer_template.options.verify_cert && c.peer_template.options.verify_hostname);
        let host = c.req.headers.get("host").unwrap().to_str().unwrap();
        assert_eq!(host, "vllm.internal:8443");
        assert_eq!(c.req.uri.path(), "/base/v1/models");
        // On the scheme's port, and in plain HTTP (no server name at all).
        let c = http_check(
            &provider(),
            &EndpointUrl::parse("https://a.example").unwrap(),
            &hc(),
        );
        assert_eq!(c.unwrap().peer_template.sni, "a.example");
        let c = http_check(
            &provider(),
            &EndpointUrl::parse("http://b:8000").unwrap(),
            &hc(),
        );
        assert_eq!(c.unwrap().peer_template.sni, "");
    }

    #[test]
    fn a_failure_is_logged_when_it_starts_and_the_recovery_once() {
        let pe = PerEndpoint {
            provider: "p".into(),
            checks: HashMap::new(),
            failing: Mutex::default(),
        };
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let err = || -> pingora::Result<()> {
            Err(pingora::Error::explain(
                pingora::ErrorType::ConnectRefused,
                "refused",
            ))
        };
        pe.record(a, &err());
        assert!(pe.failing.lock().unwrap().contains(&a));
        pe.record(a, &err());
        pe.record(a, &Ok(()));
        assert!(pe.failing.lock().unwrap().is_empty());
    }
}
