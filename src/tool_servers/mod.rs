//! The gateway as a client of third-party MCP tool servers, below the endpoints that use it:
//! [`client`] speaks Streamable HTTP to one server (SSRF-checked address, the gateway's own
//! session with it) and [`reply`] reads what it answers, [`asks`] relays what the server sends
//! the agent during a call and delivers the agent's answers, [`stateless`] finds out first whether it speaks the 2026-07-28 protocol
//! (then no session at all, but for a 2025 agent's requests to a server that keeps 2025
//! sessions too), [`check`] is the live check every registration and approval runs, and
//! [`cache`] is what one instance keeps between requests (live services, upstream sessions,
//! resolved addresses), none of it needed by another; [`live`] reads the live services through
//! it.

pub mod asks;
pub mod cache;
pub mod check;
pub mod client;
pub mod live;
pub mod reply;
pub mod stateless;
