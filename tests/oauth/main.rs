//! OAuth 2.1 for MCP clients end to end, one file per behaviour: `flow` (discovery, the
//! 401 challenge, the code flow with PKCE, tokens calling tools charged as their key, refresh
//! rotation, tokens on a second instance, expiry), `revocation` (the consent decision with the
//! session cookie, the grants list, revocation from the dashboard), `controls` (the grant's key's
//! allowed tools bind its token; revoking the key stops it), `outage` (a ledger outage
//! answers a token as its key: 503, never 401), `refusals`
//! (every bad request refused in RFC 6749's or RFC 7591's shape, the service healthy and
//! nothing issued); `common` starts the gateway and speaks OAuth. SQLite, and Postgres + Redis
//! when set. The official SDK's OAuth client with the browser consent page is `tests/oauth_sdk.rs`.

mod common;
mod controls;
mod flow;
mod outage;
mod refusals;
mod revocation;
