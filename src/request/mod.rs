//! The HTTP plumbing every handler shares, below the handlers and the Pingora adapter (it
//! imports neither): the request context from the first filter to `logging` ([`ctx`]),
//! bounded body reads ([`body`]), writing responses, errors included ([`respond`]), and when
//! each part of a request happened ([`timeline`]), and its payloads where payload logging is
//! on ([`payloads`]).

/// The client's side of one request: Pingora's HTTP server session (HTTP/1 or HTTP/2), which
/// Tollgate serves directly (`crate::proxy`).
pub use pingora::protocols::http::ServerSession as Session;

pub mod body;
pub mod ctx;
pub mod payloads;
pub mod respond;
pub mod timeline;
