//! OAuth 2.1 for MCP clients (the MCP authorization specification): Tollgate is the
//! authorization server of its own MCP endpoints, `/mcp` and `/mcp/{slug}`, so that Claude
//! Desktop, Cursor, VS Code and the MCP SDKs connect with a sign-in instead of a pasted key.
//!
//! The walk of a client's first connection:
//! 1. `/mcp` without credentials answers 401 with `WWW-Authenticate: Bearer
//!    resource_metadata=…` ([`bearer`]), which points at the protected-resource metadata
//!    (RFC 9728); it names this gateway as the authorization server, whose metadata (RFC 8414)
//!    lists the endpoints ([`metadata`]).
//! 2. The client registers itself (RFC 7591, [`register`]): a name and exact redirect URIs.
//! 3. It opens the browser at `/oauth/authorize` with a PKCE S256 challenge ([`authorize`]);
//!    the account holder signs in to the dashboard, sees which client asks for which resource,
//!    picks the API key the client will act as (or lets a new one be made) and approves.
//! 4. The client exchanges the one-time code with its verifier at `/oauth/token` ([`token`])
//!    for a short-lived access token and a refresh token that rotates on every use.
//! 5. `/mcp` resolves the access token to the grant's key ([`cache`], as briefly cached as keys,
//!    so a revocation holds everywhere within 5 s); the call is admitted, limited and charged
//!    exactly as that key's would be.
//!
//! [`store`] and [`tokens`] are the ledger's SQL for clients, grants, codes and tokens (hashes
//! only); [`grants`] is the dashboard's list of an account's grants and their revocation;
//! [`error`] is the one mapping of OAuth errors to RFC 6749's JSON; [`form`] reads and writes
//! `application/x-www-form-urlencoded`.

pub mod authorize;
pub mod bearer;
pub mod cache;
pub mod error;
pub mod form;
pub mod grants;
pub mod metadata;
pub mod register;
pub mod store;
pub mod token;
pub mod tokens;
