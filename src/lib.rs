//! # Tollgate
//!
//! A metered LLM API gateway on Pingora: one OpenAI-compatible chat-completions API in front of
//! many providers, with health-checked failover across upstream pools, usage billed in credits.
//!
//! # Layout, in the order a request meets it
//! 1. [`server`] assembles the Pingora server from the validated [`config`] (one file per TOML
//!    section) and the [`runtime`] (the config snapshot swapped on SIGHUP, and the state every
//!    service shares); [`background`] holds one file per background service (store
//!    connections, health checks, reload, lease rounds, the hold reaper).
//! 2. [`proxy`] is the Pingora adapter: [`proxy::routes`] is the one route table (404/405
//!    follow from it); [`proxy::caller`] says who is calling (key, session, guest, admin).
//! 3. [`limits`] admits the request against its plan's windows (in-process or Redis).
//! 4. [`chat`] runs a chat request: validate, resolve, route candidates, then [`metering`]
//!    places the credit hold (against a credit lease when it can), [`chat::forward`] tries
//!    candidates over the [`upstream`] pools ([`upstream::provider`] says what each provider
//!    kind means on the wire), [`chat::stream`] relays streams.
//! 5. [`metering`] settles the hold into the [`ledger`] (one file per table group, SQLite or
//!    Postgres); [`proxy::respond`] answers; [`proxy::access_log`] records the request in
//!    [`metrics`].
//!
//! Beside the chat path: [`accounts`] (signup, login, keys, usage), [`admin`] (the admin API).
//! [`clock`] is the one clock. The logic that needs no I/O (validation, SSE, routing, credit
//! arithmetic, errors) lives in `tollgate-filters`.
#![forbid(unsafe_code)]

pub mod accounts;
pub mod admin;
pub mod background;
pub mod billing;
pub mod chat;
pub mod clock;
pub mod config;
pub mod dashboard;
pub mod ledger;
pub mod limits;
pub mod logging;
pub mod mcp;
pub mod messages;
pub mod metering;
pub mod metrics;
pub mod proxy;
pub mod runtime;
pub mod server;
pub mod upstream;
