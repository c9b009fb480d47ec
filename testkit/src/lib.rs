//! Tollgate's test kit: the fakes a test needs and the real gateway binary started on a
//! generated config, shared by the integration tests (`tests/`) and the benchmarks (`benches/`).
//!
//! # Layout
//! - [`gateway`]: [`Gateway`] starts the `tollgate` binary on its own ports, database and Redis
//!   prefix, with a funded account ([`Gateway::second`]: another instance on the same database
//!   and prefix); [`tollgate_bin!`] names the binary cargo built for the caller, and
//!   [`one_model_config`] writes the one-provider, one-model config most tests start from;
//!   [`paid_and_free`] and [`small_plans`] start the gateways the account and limit tests share.
//! - [`openai`]: [`FakeOpenAi`], an OpenAI-compatible provider that can fail every way a real
//!   one does (one [`Mode`] away), built with [`FakeOpenAi::builder`].
//! - [`prefix_cache`]: the prompt cache of a fake in [`Mode::PrefixCache`], per endpoint, and
//!   the tokens it counts.
//! - [`anthropic`]: [`FakeAnthropic`], a Messages API provider with every stream event type,
//!   parallel tool use, prompt-cache usage and Anthropic's failures ([`AnthropicMode`]).
//! - [`mcp`]: [`FakeToolServer`], an MCP tool server (sessions, JSON or SSE, a plain handler)
//!   with every failure of a call ([`ToolMode`]).
//! - [`fastmcp`]: [`FastMcpServer`], a tool server made with the official `mcp` SDK's FastMCP.
//! - [`conformance`]: the official MCP conformance suite run against a reference server on the
//!   `mcp` 2.x SDK, directly and through the gateway (with a forwarder adding the key).
//! - [`collector`]: [`Collector`], an OpenTelemetry collector that decodes trace exports with
//!   the official `opentelemetry-proto` package: up, hanging or down ([`CollectorMode`]).
//! - [`stripe`]: [`FakeStripe`], the Stripe API's Checkout, line items and Billing Portal, and
//!   webhook events signed with Stripe's scheme ([`stripe::sign`]).
//! - [`receiver`]: [`Receiver`], a customer's webhook receiver recording every delivery, to
//!   answer 503 or take down and bring back on its port.
//! - [`redis`]: [`PrivateRedis`], a `redis-server` of a test's own, to kill and bring back.
//! - [`postgres`]: [`PrivatePostgres`], a Postgres cluster of a test's own, to stop and start
//!   again.
//! - [`tmpfs`]: [`SmallTmpfs`], a tmpfs of a few hundred KB, to fill up (ENOSPC) and free.
//! - [`books`]: an account's balance, holds and usage rows read straight from the ledger, and
//!   the fault tests' check that they balance; stored responses aged past their retention.
//! - [`legacy`]: the fake provider's legacy `/v1/completions`, JSON and streamed.
//! - [`responses`]: the fake provider's own `/v1/responses`, for a provider that serves the
//!   Responses API itself.
//! - [`http`]: a small HTTP/1.1 client that shows exactly what went over the wire.
//! - [`services`]: which Postgres and Redis the run uses, and [`skip`] for a test that cannot
//!   run here.
//! - [`floor`]: Pingora's own proxy with no logic, the benchmarks' floor for one hop.
//! - [`load`]: the keep-alive response reader of the load generator and the end-to-end bench.
//!
//! `use tollgate_testkit::*;` brings all of it.
#![forbid(unsafe_code)]

mod accept;
pub mod anthropic;
pub mod books;
pub mod collector;
pub mod conformance;
pub mod embeddings;
pub mod fastmcp;
pub mod floor;
pub mod front;
pub mod gateway;
pub mod http;
pub mod legacy;
pub mod load;
pub mod mcp;
mod mcp_2026;
mod mcp_ask;
pub mod nginx;
pub mod oidc;
pub mod openai;
pub mod pgbouncer;
pub mod postgres;
pub mod prefix_cache;
pub mod prompt_cache;
pub mod receiver;
pub mod redis;
pub mod responses;
pub mod scenarios;
pub mod scenarios_fake;
pub mod services;
pub mod stripe;
pub mod tmpfs;

pub use anthropic::{anthropic_provider, AnthropicMode, FakeAnthropic, FAKE_ANTHROPIC_KEY};
pub use collector::{Collector, CollectorMode, OTLP_IMPORT};
pub use fastmcp::FastMcpServer;
pub use front::RoundRobin;
pub use gateway::{
    free_port, micros, model, one_model_config, paid_and_free, provider, small_plans, temp_dir,
    unique_email, Gateway, Opts, ADMIN_TOKEN, FAST_TIMEOUTS, SMALL_PLANS,
};
pub use http::{get, parse_response, post_json, raw_request, request, Response};
pub use mcp::{FakeToolServer, ToolMode, VERBATIM_RESULT};
pub use oidc::OidcProvider;
pub use openai::{user, FakeOpenAi, FakeOpenAiBuilder, Mode, Recorded};
pub use postgres::PrivatePostgres;
pub use prompt_cache::CacheUsage;
pub use receiver::{Delivery, Receiver};
pub use redis::PrivateRedis;
pub use services::{
    claude_code, codex, database_url, gemini_cli, python_mcp2, python_with, redis_url,
    services_required, skip,
};
pub use stripe::{FakeStripe, StripeMode, FAKE_STRIPE_KEY, WEBHOOK_SECRET, WEBHOOK_SECRET_OLD};
pub use tmpfs::{is_enospc, SmallTmpfs};
