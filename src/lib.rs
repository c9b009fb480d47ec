//! # Tollgate
//!
//! A metered LLM API gateway on Pingora: one OpenAI-compatible chat-completions API in front of
//! many providers, with health-checked failover across upstream pools.
//!
//! # Layout
//! - [`config`]: the TOML file, validated into [`config::Config`] with every error's key path.
//! - [`state`]: the runtime snapshot (config, catalog, pools) swapped whole on SIGHUP.
//! - [`upstream`]: provider pools on `pingora-load-balancing`, active and passive health.
//! - [`proxy`]: the Pingora service. [`proxy::chat`] runs the pipeline of one chat request and
//!   [`proxy::forward`] the forwarding loop; [`proxy::respond`] writes responses.
//! - [`services`]: the background services (health checks, SIGHUP reload) and server assembly.
//! - [`metrics`]: Prometheus metrics and their endpoint.
//! - [`store`]: the ledger (accounts, keys, holds, usage) on SQLite or Postgres.
//! - [`auth`]: API keys with their cache, sessions, passwords, the login throttle.
//! - [`limits`]: rate limits per plan, in-process or in Redis.
//! - [`leases`]: credit leases, so the ledger is written in batches off the request path.
//! - [`metering`]: the credit hold before forwarding and the settlement after.
//!
//! The logic that needs no I/O (validation, SSE, routing, errors) lives in `tollgate-filters`.
#![forbid(unsafe_code)]

pub mod auth;
pub mod config;
pub mod leases;
pub mod limits;
pub mod metering;
pub mod metrics;
pub mod proxy;
pub mod services;
pub mod state;
pub mod store;
pub mod upstream;

/// Unix time in milliseconds (the ledger's clock).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
