//! Name resolution of endpoint hosts, asynchronously, off the request path (`HttpPeer::new`
//! with a name would block a worker): when a pool is built (start and reload) and again in the
//! background (`background::names`), so that a provider whose addresses move is
//! followed without a reload.
//!
//! The system's resolver answers (tokio's `lookup_host`, i.e. `getaddrinfo`: `/etc/hosts`, then
//! DNS as `nsswitch.conf` says). It does not report a record's TTL; a caching resolver in front
//! (systemd-resolved, nscd, dnsmasq, a cluster's DNS) honours it, and the gateway asks again
//! every `[server] dns_refresh_secs` (docs/operations.md, "DNS").

use std::net::{IpAddr, SocketAddr};

use crate::config::{EndpointUrl, Provider};

/// What one resolution of a provider's hosts gave.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Every address of every endpoint URL, in config order then the resolver's order; an
    /// address two URLs share is listed once (the balancer keys endpoints by address).
    pub endpoints: Vec<(EndpointUrl, SocketAddr)>,
    /// Hosts that did not resolve, with the resolver's reason: their endpoints are left out
    /// until a later resolution finds them.
    pub failed: Vec<(String, String)>,
}

impl Resolved {
    /// The addresses only, for comparing two resolutions.
    pub fn addresses(&self) -> Vec<(String, SocketAddr)> {
        self.endpoints
            .iter()
            .map(|(u, a)| (u.host.clone(), *a))
            .collect()
    }
}

/// True when some endpoint of the provider is a name (an address literal never changes).
pub fn has_names(provider: &Provider) -> bool {
    provider
        .endpoints
        .iter()
        .any(|u| u.host.parse::<IpAddr>().is_err())
}

/// Resolves every endpoint host of a provider with tokio's resolver (never blocking a worker).
/// A host that does not resolve is left out with a warning rather than failing the start: an
/// instance must come up while one provider's DNS is broken; the background resolution tries
/// it again.
pub async fn resolve(provider: &Provider) -> Resolved {
    let mut out = Resolved::default();
    for url in &provider.endpoints {
        match tokio::net::lookup_host((url.host.as_str(), url.port)).await {
            Ok(addrs) => {
                let mut any = false;
                for addr in addrs {
                    any = true;
                    if !out.endpoints.iter().any(|(_, a)| *a == addr) {
                        out.endpoints.push((url.clone(), addr));
                    }
                }
                if !any {
                    out.failed
                        .push((url.host.clone(), "the name has no address".into()));
                }
            }
            Err(e) => out.failed.push((url.host.clone(), e.to_string())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(endpoints: &[&str]) -> Provider {
        let list: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
        let config = crate::config::parse(&format!(
            "[[providers]]\nname = \"p\"\nendpoints = [{}]\n",
            list.join(", ")
        ))
        .unwrap();
        config.providers[0].clone()
    }

    #[tokio::test]
    async fn every_address_once_and_unresolvable_names_reported() {
        let p = provider(&[
            "http://127.0.0.1:9000",
            "http://127.0.0.1:9000/other",
            "http://localhost:9001",
            "http://no-such-host.invalid:9002",
        ]);
        assert!(has_names(&p));
        let r = resolve(&p).await;
        assert_eq!(r.endpoints[0].1, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            r.endpoints.iter().filter(|(_, a)| a.port() == 9000).count(),
            1,
            "one address listed once"
        );
        assert!(r.endpoints.iter().any(|(u, _)| u.host == "localhost"));
        assert_eq!(r.failed.len(), 1);
        assert_eq!(r.failed[0].0, "no-such-host.invalid");
        assert!(!has_names(&provider(&[
            "http://127.0.0.1:1",
            "http://[::1]:2"
        ])));
    }
}
