//! Accounts and who may do what, one file per behaviour: `signup` (what a new account gets,
//! bad input refused), `sessions` (logging in, the session cookie, `/me`, logout),
//! `login_throttle` (wrong passwords per e-mail across addresses and instances), `admin` (the
//! admin API: credit adjustments and plans), `operator` (what the dashboard reads, the admin
//! API under an operator's session), `abuse` (what one hostile address can do, bounded),
//! `guest_limits` (guests limited by client address), `ratelimits` (plans' hourly and daily
//! windows, exact under concurrency), `reserved_admissions` (admissions leased from Redis in
//! batches, never more than the limit over two instances; needs Redis). Runs on SQLite +
//! in-process counters, and on Postgres + Redis when set.
//!
//! The dashboard in a real browser is `tests/dashboard.rs`, a binary of its own: it drives
//! headless Chromium through journeys bounded to 90 s, with an alias change 25 s after its
//! gateway starts.

mod abuse;
mod admin;
mod guest_limits;
mod login_throttle;
mod operator;
mod ratelimits;
mod reserved_admissions;
mod sessions;
mod signup;
