//! The MCP tool marketplace (DESIGN.md, Rules: MCP): developers register paid tool servers
//! ([`registry`], checked live through [`upstream`]), the operator approves them, agents list
//! and call their tools through [`endpoint`] with a Tollgate key, and each successful call is
//! charged its price with 80% (rounded up) credited to the developer (`metering::tool`).
//! [`cache`] is what one instance keeps between requests, none of it needed by another.

pub mod cache;
pub mod endpoint;
pub mod registry;
pub mod upstream;
