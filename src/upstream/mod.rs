//! Upstreams: one pool per provider ([`pool`]) on `pingora-load-balancing`, built from
//! endpoints resolved at start and reload ([`resolve`]), checked actively ([`health`]) and
//! passively, and what each provider kind means on the wire ([`provider`]); the exchange itself
//! ([`wire`]) on connections kept between requests ([`idle`]), and why an attempt fails over
//! ([`failover`]). (The built-in demo provider
//! the gateway serves to itself is a handler: `demo`.)

mod chunked;
pub mod failover;
pub mod head;
pub mod health;
pub mod idle;
pub mod outbound;
pub mod pool;
pub mod provider;
pub mod resolve;
pub mod wire;
#[cfg(test)]
mod wire_props;
#[cfg(test)]
mod wire_tests;

pub use idle::Connections;
pub use pool::{build_pool, Endpoint, Pool};
pub use resolve::resolve;
