//! API keys and what each key's own settings do (issue 29), one file per behaviour:
//! `issue_and_revoke` (issued, listed, revoked, on another instance within 5 s; malformed,
//! unknown and missing keys refused), `allowlist` (a key's models, on every front door and
//! across failover), `budgets` (a credit cap per period held like the balance, never overrun
//! by concurrent requests on two instances, starting over at the period's turn),
//! `budget_redis` (a budgeted key refused while its private Redis is down, going on from what
//! it spent when Redis comes back empty), `expiry` (`expires_at` on every instance), `rotation`
//! (a successor, the old key through its grace period). Runs on SQLite, and on Postgres + Redis
//! when set (two instances there).
//!
//! A key's rate and in-flight limits are `tests/key_limits.rs`, a binary of its own: its
//! assertions rest on sub-second windows (a stream still in flight 300 ms on, slots back within
//! 2 s, held at least 500 ms).

mod allowlist;
mod budget_redis;
mod budgets;
mod expiry;
mod issue_and_revoke;
mod rotation;
