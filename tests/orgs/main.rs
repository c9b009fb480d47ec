//! Organizations (issue 51), one file per behaviour: `caps` (a member's credit cap per
//! period across its organization keys, never overrun on two instances), `members` (create, invite, accept, roles,
//! remove, transfer, leave; every endpoint's role checked, bad input refused, nothing
//! revealed of an organization the caller is not in), `wallet` (organization keys spend from
//! the organization's wallet: ten members on two instances never overdraw it, the books
//! exact; its plan's limits hold across all members' keys; a removed member's keys stop on
//! both instances), `models` (the organization's
//! model allowlist over every organization key), `usage` (per member and per key, JSON and CSV; a member sees its own).
//! Runs on SQLite, and on Postgres + Redis when set (two instances there).

mod caps;
mod members;
mod models;
mod usage;
mod wallet;
