//! The exact response cache (README, "Response cache"), one file per behaviour: `hits` (a
//! repeated request answered from the cache with no provider call, the same body or stream
//! events, charged its configured fraction, marked in usage and counted in the savings; the
//! Messages door's own events), `scope` (another account never hits; `no-store`; `off`; a
//! sampled request cached only when it asked; the key setting; the body extension), `caps`
//! (an entry expires after `ttl_secs` on an instance whose clock moved on; a reply over
//! `max_entry_bytes` is not stored; past `max_total_bytes` the oldest is evicted), `flight` (50
//! identical requests at once call the provider once, each answered the same and charged
//! correctly), `savings` (an organization's keys share its entries, its usage shows the saving;
//! a provider's cache reads counted), `bad_input` (bad headers, extensions, key settings and config values refused
//! by name). Runs on SQLite (the ledger's table), and on Postgres + Redis (Redis keeps the
//! entries) when `TOLLGATE_TEST_DATABASE_URL` and `TOLLGATE_TEST_REDIS_URL` are set.

mod bad_input;
mod caps;
mod common;
mod flight;
mod hits;
mod savings;
mod scope;
