//! The live tool servers, as every caller of the marketplace reads them: from this instance's
//! short cache ([`super::cache::LIVE_TTL`]) or the ledger.

use std::sync::Arc;

use tollgate_filters::mcp::ServiceState;
use tollgate_filters::GatewayError;

use crate::ledger::mcp::Service;
use crate::runtime::Shared;

/// The live services, from this instance's short cache or the ledger.
pub async fn services(shared: &Shared) -> Result<Arc<Vec<Service>>, GatewayError> {
    if let Some(l) = shared.mcp.live() {
        return Ok(l);
    }
    let l = Arc::new(
        shared
            .ledger()?
            .services(None, Some(ServiceState::Live))
            .await?,
    );
    shared.mcp.set_live(l.clone());
    Ok(l)
}
