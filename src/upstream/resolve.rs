//! Name resolution of endpoint hosts, asynchronously, when a pool is built (start and reload),
//! so that nothing on the request path resolves a name (`HttpPeer::new` with a name blocks).

use std::net::SocketAddr;

use crate::config::{EndpointUrl, Provider};

/// Resolves every endpoint host of a provider with tokio's resolver (never blocking a worker).
/// A host that does not resolve is left out with a warning rather than failing the start: an
/// instance must come up while one provider's DNS is broken. It is resolved again on reload.
pub async fn resolve(provider: &Provider) -> Vec<(EndpointUrl, SocketAddr)> {
    let mut out = Vec::new();
    for url in &provider.endpoints {
        match tokio::net::lookup_host((url.host.as_str(), url.port)).await {
            // One address per URL keeps the pool the size the operator wrote.
            Ok(mut addrs) => match addrs.next() {
                Some(addr) => out.push((url.clone(), addr)),
                None => {
                    tracing::warn!(provider = %provider.name, host = %url.host, "host has no address; endpoint left out")
                }
            },
            Err(e) => {
                tracing::warn!(provider = %provider.name, host = %url.host, "cannot resolve, endpoint left out until reload: {e}")
            }
        }
    }
    out
}
