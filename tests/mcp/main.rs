//! The MCP tool marketplace end to end, one file per behaviour: `registration` (checked live
//! and refused clearly, the SSRF guard, the states and who may move them), `calls` (`/mcp` and
//! `/mcp/{slug}` for agents, sessions re-initialised upstream, any instance serving any agent),
//! `charging` (exact charges, the developer's share, the plan's rate limit), `failures` (every
//! failed call free, a crash mid-call too), `bad_input` (clear errors, nothing changed),
//! `tool_filter` (a key limited to some services or tools), `tool_prices` (a price per tool,
//! earnings per tool), `stateless` (a 2026-07-28 client: discover, the era's checks and shapes; a 2026-only tool
//! server), `relay` (a tool server's progress and log notifications relayed during a call),
//! `asks` (its sampling and elicitation requests relayed, answered through either instance),
//! `inputs` (a 2026 server's input requests put to a 2025 agent, the call retried), `eras` (a
//! server of both eras spoken to in each agent's era; `/mcp/{slug}` declaring the server's
//! capabilities); `common` starts the gateway and speaks its API. SQLite, and Postgres + Redis when set.

mod asks;
mod bad_input;
mod calls;
mod charging;
mod common;
mod eras;
mod failures;
mod inputs;
mod registration;
mod relay;
mod stateless;
mod tool_filter;
mod tool_prices;
