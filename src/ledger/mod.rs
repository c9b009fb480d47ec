//! The ledger store: accounts, keys, sessions, credit holds, usage rows and credit-ledger
//! entries, on SQLite (the embedded default) or Postgres, with the same SQL where the dialects
//! agree.
//!
//! Credits never go below zero and are never lost or doubled:
//! - a hold is one statement that debits `min(balance, wanted)` only where `balance >= minimum`
//!   and records the hold (no row lock outlives the statement, none is held across the
//!   upstream call);
//! - a settlement is one statement that deletes the hold, refunds it less the charge and
//!   writes the usage row (one round trip, no lock upgrade, so no settlement deadlock). On
//!   Postgres these are data-modifying CTEs; on SQLite an `INSERT … SELECT` whose trigger
//!   (migration 0002) moves the money inside the same statement (a settlement's trigger is on
//!   the view `usage_settlements`, migration 0013, so a lease round's rows run none);
//! - a hold left by a crashed instance expires and is refunded by whichever instance deletes it
//!   first; a settlement that finds its hold gone charges the balance directly, clamped at zero.
//!
//! A statement that writes and returns rows outside a transaction (`INSERT … RETURNING` on a
//! pool) is always fetched to its end (`fetch_all`), never `fetch_one`/`fetch_optional`: on
//! SQLite the implicit transaction commits at the statement's last step, and a driver that
//! stops after the first row resets the statement and drops that commit's error (a full
//! disk): the caller saw the row of a write that was rolled back. This was how a full disk
//! served requests whose usage rows never existed.
//!
//! Postgres statements that must return a value computed from the old row (the amount actually
//! held or charged) write it to `accounts.scratch` in the same `UPDATE` and read it back with
//! `RETURNING`: every `SET` expression is evaluated against the old row.
//!
//! # Layout
//! One `impl Ledger` block per table group: [`store`] (the handle, connect, migrations,
//! errors), [`pinned`] (Postgres behind a transaction-mode pooler: every statement in a
//! transaction on one server connection), [`breaker`] (the circuit that fails requests at once while the store is down), [`accounts`], [`keys`], [`sessions`], [`credits`] (holds and settlement, the
//! reaper), [`leases`] (credit-lease rounds), [`usage`], [`legs`] (a resumed stream's legs), [`mcp`] (tool servers and their
//! developers' earnings), [`orgs`] (organizations, their members and invitations), [`sso`] (their single sign-on), [`payments`] (checkouts, payment history, anonymous accounts and their
//! assignment), [`responses`] (stored Responses API replies), [`request_log`] (each metered request's record and, where turned on, its payloads), [`response_cache`] (cached replies, where no Redis keeps them), [`payment_events`] (each Stripe webhook event applied once, in one
//! transaction with its record) and [`webhooks`] (events sent to customers: endpoints, each
//! event written once, the outbox of deliveries in order per endpoint).

pub mod accounts;
pub mod breaker;
pub mod credits;
pub mod keys;
pub mod leases;
pub mod legs;
pub mod mcp;
pub mod orgs;
pub mod payment_events;
pub mod payments;
pub mod pinned;
pub mod request_log;
pub mod response_cache;
pub mod responses;
pub mod sessions;
pub mod sso;
pub mod store;
pub mod usage;
pub mod webhooks;

pub use accounts::Account;
pub use credits::{Saving, Settled, Settlement, ToolCharge};
pub use keys::{KeyAuth, KeyChange, KeyLimits, KeyRow, NewKey, OrgMember};
pub use leases::{LeaseRound, LeaseSynced};
pub use store::{Ledger, StoreError};
pub use usage::{KeyUsage, Savings, UsageAgg, UsageRow};
