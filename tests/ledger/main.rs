//! The money: metering and the ledger that holds it, one file per behaviour: `credits` (what a
//! request, a failure and a cut stream cost; concurrent requests never overdraw; a crashed
//! instance's holds come back), `leases` (an instance metering from a slice of the balance,
//! exact on two instances, returned when idle, for an admin debit and at shutdown),
//! `hold_failover` (the hold topped up, lowered or skipped across a failover), `store` (the
//! ledger store itself, without the binary: the lease round, settlements written once,
//! SQLite's write-ahead log kept small), `schema` (what the usage table's schema promises the
//! hot path). Runs on SQLite, and on Postgres (+ Redis) when set.

mod credits;
mod hold_failover;
mod leases;
mod schema;
mod store;
