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
//!
//! The logic that needs no I/O (validation, SSE, routing, errors) lives in `tollgate-filters`.
#![forbid(unsafe_code)]

pub mod config;
pub mod metrics;
pub mod proxy;
pub mod services;
pub mod state;
pub mod upstream;
