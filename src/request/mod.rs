//! The HTTP plumbing every handler shares, below the handlers and the Pingora adapter (it
//! imports neither): the request context from the first filter to `logging` ([`ctx`]),
//! bounded body reads ([`body`]), and writing responses, errors included ([`respond`]).

pub mod body;
pub mod ctx;
pub mod respond;
