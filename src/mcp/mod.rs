//! The MCP tool marketplace's endpoints (DESIGN.md, Rules: MCP), one file per caller:
//! developers register paid tool servers and read their earnings ([`developer`]), the operator
//! approves them ([`operator`]), agents list and call their tools through [`endpoint`] with a
//! Tollgate key, and each successful call is charged its price with 80% (rounded up) credited
//! to the developer (`metering::tool`). The gateway's side of a tool server (the MCP client,
//! the live check, what one instance keeps between requests) is below, in `tool_servers`.
//! The endpoints answer only through this gateway's own host and pages ([`origin`]), to
//! clients of both protocol eras ([`stateless`]: the 2026-07-28 one), with a tool server's
//! progress and log notifications during a call relayed to the agent ([`relay`]), and its
//! requests to the client (sampling, elicitation) relayed and answered on any instance
//! ([`asks`]); a 2026 server's input requests put to a 2025 client ([`inputs`]).

pub mod asks;
pub mod developer;
pub mod endpoint;
pub mod forward;
pub mod inputs;
pub mod operator;
pub mod origin;
pub mod relay;
pub mod stateless;
