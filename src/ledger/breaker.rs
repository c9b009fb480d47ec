//! The ledger's circuit: open while the store is known not to answer, so that a request that
//! needs it fails at once (503) instead of each waiting out the pool's acquire timeout, and
//! requests never queue behind each other's timeouts (DESIGN.md, Rules: Faults).
//!
//! It opens on the first error that says the store itself is unreachable (the pool timed out,
//! a socket or TLS failure, Postgres shutting down or refusing connections): seen where every
//! store error is made, in `From<sqlx::Error>`, which has no handle of its own, so the state is
//! the process's (one process, one ledger). It closes when the background probe
//! ([`crate::background::ledger`]) reads a `SELECT 1` again. An error of one statement (a
//! constraint, a full SQLite disk) leaves it alone.
//!
//! Only the calls a request waits on ask it ([`check`]): placing and growing holds, opening
//! and renewing leases, settling, looking up a key, reading an account. The retry pass of
//! unsettled settlements and the reaper do not, so they keep probing too.

use std::sync::atomic::{AtomicI64, Ordering};

/// When (ms) the circuit opened; 0: closed.
static OPEN_SINCE_MS: AtomicI64 = AtomicI64::new(0);

/// Whether the circuit is open: the store was found unreachable and has not answered since.
pub fn is_open() -> bool {
    OPEN_SINCE_MS.load(Ordering::Relaxed) != 0
}

/// The error of a call not sent because the circuit is open (a store error: 503).
#[derive(Debug)]
pub struct CircuitOpen;

impl std::fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the ledger store does not answer (circuit open; probed in the background)")
    }
}

/// An error at once while the circuit is open.
pub fn check() -> Result<(), CircuitOpen> {
    if is_open() {
        return Err(CircuitOpen);
    }
    Ok(())
}

/// Opens the circuit (a store error that says the store is unreachable).
pub fn trip() {
    let now = crate::clock::now_ms().max(1);
    if OPEN_SINCE_MS
        .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        tracing::error!(
            "ledger store unreachable: failing requests that need it at once until a probe answers"
        );
    }
}

/// Closes the circuit (a probe answered). Returns how long it was open, if it was.
pub fn close() -> Option<i64> {
    let since = OPEN_SINCE_MS.swap(0, Ordering::Relaxed);
    (since != 0).then(|| crate::clock::now_ms() - since)
}

/// Whether `e` says the store cannot be reached at all, not that one statement failed.
pub fn unreachable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| {
            // Postgres: connection exceptions (class 08), an administrator or crash shutdown,
            // starting up or shutting down (57P01-57P03), too many connections (53300).
            c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unreachable_store_opens_the_circuit_and_a_probe_closes_it() {
        assert!(unreachable(&sqlx::Error::PoolTimedOut));
        assert!(unreachable(&sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        ))));
        assert!(!unreachable(&sqlx::Error::RowNotFound));
        assert!(!unreachable(&sqlx::Error::ColumnNotFound("x".into())));
        // The state is the process's: this is the only test of the crate that changes it.
        trip();
        assert!(is_open());
        assert!(check().is_err());
        trip();
        assert!(close().is_some());
        assert!(check().is_ok());
        assert!(close().is_none());
    }
}
