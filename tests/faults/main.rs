//! Faults lose no money (DESIGN.md, Rules: Faults and One balance): a real store of the test's
//! own is broken under load (a SQLite database on a tmpfs that fills up, a Postgres cluster
//! stopped and started), and at the end every account's books balance to the micro-credit.

mod disk_full;
mod ledger_outage;
mod load;
mod one_balance;
mod unsettled;
