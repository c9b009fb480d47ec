//! The request log (issue 52), one file per behaviour: `records` (every metered request has its
//! record: a JSON reply, a stream, a failover over a failing provider, a 402, a tool call;
//! listed, filtered, paged and exported as JSON lines), `payloads` (stored only where the key,
//! the account or the organization turned payload logging on; redacted of API and provider
//! keys, capped, a stream reassembled), `access` (another wallet's record is 404; an
//! organization's owner sees its members', a member its own), `retention` (payloads nulled,
//! then records deleted, on an instance whose clock moved on), `bad_input` (every new
//! parameter and body refused with its name, nothing changed).
//! Runs on SQLite, and on Postgres + Redis when set.

mod access;
mod bad_input;
mod common;
mod payloads;
mod records;
mod retention;
