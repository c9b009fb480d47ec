//! How many client connections the proxy holds at once: the process's open-file limit raised
//! at start (systemd and most shells start a service with a soft limit of 1,024, far below
//! what an idle keep-alive client costs, and ask a program to raise it itself, as nginx's
//! `worker_rlimit_nofile` and HAProxy do), and the bound on connections the accept loops
//! share ([`Gate`]): at the bound a loop stops accepting, so new clients wait in the listen
//! backlog instead of meeting an error, and it accepts again as connections close.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// File descriptors kept for upstream, store and log connections: at least this many, or a
/// tenth of the limit.
const RESERVED_FDS: u64 = 256;
/// The open-file limit assumed when it cannot be read.
const FALLBACK_LIMIT: u64 = 1024;
/// A hard limit of "unlimited" is taken as this (Linux's default `nr_open`).
const UNLIMITED_AS: u64 = 1 << 20;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, saying so in the log; returns the soft
/// limit the process runs with.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot read the open-file limit, assuming {FALLBACK_LIMIT}: {e}");
            return FALLBACK_LIMIT;
        }
    };
    let hard = if hard == RLIM_INFINITY {
        UNLIMITED_AS
    } else {
        hard
    };
    if soft >= hard {
        tracing::info!(limit = soft, "open-file limit");
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            tracing::info!(
                from = soft,
                to = hard,
                "raised the open-file limit to its hard limit"
            );
            hard
        }
        Err(e) => {
            tracing::warn!(soft, hard, "could not raise the open-file limit: {e}");
            soft
        }
    }
}

/// The connection bound when `server.max_connections` does not set one: the open-file limit
/// less what upstream and store connections may need.
pub fn default_max_connections(fd_limit: u64) -> usize {
    let reserved = RESERVED_FDS.max(fd_limit / 10);
    usize::try_from(fd_limit.saturating_sub(reserved).max(16)).unwrap_or(usize::MAX)
}

/// The bound every accept loop of a listener shares: a connection holds one permit from its
/// accept to its close.
#[derive(Clone)]
pub struct Gate {
    permits: Arc<Semaphore>,
    max: usize,
}

/// When (ms) the bound was last reported in the log.
static REPORTED_MS: AtomicI64 = AtomicI64::new(0);

impl Gate {
    pub fn new(max_connections: usize) -> Gate {
        let max = max_connections.clamp(1, Semaphore::MAX_PERMITS);
        Gate {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Waits while the bound is reached (without accepting anything). Holds no place: each
    /// proxy thread's socket has its own queue, and a loop holding a place while it waits on
    /// an empty queue would keep a connection queued at another from it.
    pub async fn room(&self) {
        drop(self.enter().await);
    }

    /// The place of a connection just accepted: at once when there is room, else (another
    /// loop took the last place meanwhile) once a connection closes.
    pub async fn admit(&self) -> Option<OwnedSemaphorePermit> {
        match self.permits.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => self.enter().await,
        }
    }

    /// A place for one more connection, waiting while the bound is reached.
    pub async fn enter(&self) -> Option<OwnedSemaphorePermit> {
        if self.permits.available_permits() == 0 {
            let now = crate::clock::now_ms();
            let last = REPORTED_MS.load(Ordering::Relaxed);
            if now - last >= 10_000
                && REPORTED_MS
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::warn!(
                    max_connections = self.max,
                    "at the connection bound: new connections wait until others close"
                );
            }
        }
        self.permits.clone().acquire_owned().await.ok()
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bound_leaves_room_for_upstream_and_store_connections() {
        assert_eq!(default_max_connections(1024), 768);
        assert_eq!(default_max_connections(10_240), 9_216);
        assert_eq!(default_max_connections(100), 16);
    }

    #[tokio::test]
    async fn a_connection_past_the_bound_waits_for_one_to_close() {
        let gate = Gate::new(2);
        let a = gate.enter().await.unwrap();
        let _b = gate.enter().await.unwrap();
        assert_eq!(gate.open(), 2);
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.enter().await.is_some() }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "entered past the bound");
        drop(a);
        assert!(waiting.await.unwrap());
    }
}
