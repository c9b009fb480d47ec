//! The pricing page and the dashboard app, served by the gateway itself (assets embedded).
//! Placeholder until the dashboard lands.

use pingora::proxy::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::proxy::ctx::RequestCtx;
use crate::runtime::Shared;

/// `GET /`, `/pricing`, `/dashboard`, `/dashboard/{page}`: the app's page.
pub async fn page(
    _shared: &Shared,
    _session: &mut Session,
    _ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    Err(GatewayError::new(ErrorKind::NotFound, "no dashboard yet"))
}

/// `GET /assets/{name}`: an embedded asset.
pub async fn asset(
    _shared: &Shared,
    _session: &mut Session,
    _ctx: &mut RequestCtx,
    name: &str,
) -> Result<(), GatewayError> {
    Err(GatewayError::new(
        ErrorKind::NotFound,
        format!("no asset `{name}`"),
    ))
}
