//! Where an instance hands its listening sockets to the one replacing it, and where a new
//! instance tells the old one it accepts (the exchange: `proxy::handover`).
//!
//! Every instance listens on `server.upgrade_socket`. A new one started with `--upgrade` took
//! the sockets while it started; here it claims the path for the next upgrade, waits until
//! every accept loop runs, and tells the old instance, which then stops as on SIGTERM: no new
//! connection accepted, what it accepted finished within its grace period.

use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::proxy::handover::{self, Role};
use crate::proxy::listen::Listening;
use crate::runtime::Shared;

/// How long a new instance waits for its accept loops before telling the old one anyway (the
/// sockets' queues hold what comes meanwhile).
const LOOPS_START_WITHIN: Duration = Duration::from_secs(10);
/// How long a new instance waits to be ready (its ledger connected) before it accepts anyway.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long an old instance waits for the new one to say it accepts.
const ACCEPT_WITHIN: Duration = Duration::from_secs(120);

pub struct UpgradeService {
    shared: Arc<Shared>,
    path: Option<PathBuf>,
    /// Copies of this instance's listening sockets, to hand over; dropped when it stops, so a
    /// plain stop closes its sockets once its accept loops end.
    copies: Mutex<Option<Vec<(Role, TcpListener)>>>,
    /// The instance this one replaced, until told.
    old: Mutex<Option<UnixStream>>,
    listening: Listening,
    accept_loops: usize,
}

impl UpgradeService {
    pub fn new(
        shared: Arc<Shared>,
        path: Option<PathBuf>,
        copies: Vec<(Role, TcpListener)>,
        old: Option<UnixStream>,
        listening: Listening,
        accept_loops: usize,
    ) -> UpgradeService {
        UpgradeService {
            shared,
            path,
            copies: Mutex::new(Some(copies)),
            old: Mutex::new(old),
            listening,
            accept_loops,
        }
    }

    fn take_old(&self) -> Option<UnixStream> {
        self.old.lock().ok().and_then(|mut o| o.take())
    }

    fn copies(&self) -> std::io::Result<Vec<(Role, TcpListener)>> {
        let copies = self
            .copies
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let Some(copies) = copies.as_ref() else {
            return Err(std::io::Error::other("stopping"));
        };
        copies
            .iter()
            .map(|(r, l)| Ok((*r, l.try_clone()?)))
            .collect()
    }

    /// Hands the sockets to the instance on `conn`; true when it then accepts.
    async fn hand_over(&self, conn: tokio::net::UnixStream) -> bool {
        let sockets = match self.copies() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("upgrade refused: {e}");
                return false;
            }
        };
        let conn = match conn.into_std().and_then(|c| {
            c.set_nonblocking(false)?;
            c.set_read_timeout(Some(ACCEPT_WITHIN))?;
            Ok(c)
        }) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("upgrade: {e}");
                return false;
            }
        };
        let done = tokio::task::spawn_blocking(move || {
            handover::send(&conn, &sockets)?;
            drop(sockets);
            Ok::<bool, std::io::Error>(handover::wait_accepting(conn))
        })
        .await;
        match done {
            Ok(Ok(true)) => true,
            Ok(Ok(false)) => {
                tracing::warn!("upgrade: the new instance went away before accepting; serving on");
                false
            }
            Ok(Err(e)) => {
                tracing::warn!("upgrade: cannot hand the sockets over: {e}; serving on");
                false
            }
            Err(e) => {
                tracing::warn!("upgrade: {e}");
                false
            }
        }
    }
}

#[async_trait]
impl BackgroundService for UpgradeService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let old = self.take_old();
        // A first start claims the upgrade path at once; one taking over, only once it is ready
        // and accepts, just before the old instance is told (until then an upgrade still
        // reaches the old instance, which serves on if this one dies first).
        let mut listener = match old {
            None => self.path.as_deref().and_then(claim),
            Some(_) => None,
        };
        if let Some(old) = old {
            // Ready first: from its first accept this instance takes connections the old one
            // would have served.
            let ready = async {
                while self.shared.ledger.get().is_none() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            if tokio::time::timeout(READY_WITHIN, ready).await.is_err() {
                tracing::warn!("upgrade: the ledger is not connected yet; accepting anyway");
            }
            self.listening.open();
            // Accepting from every socket before the old instance stops accepting.
            let all = self.listening.wait_for(self.accept_loops);
            if tokio::time::timeout(LOOPS_START_WITHIN, all).await.is_err() {
                tracing::warn!(
                    "upgrade: not every accept loop started; telling the old instance anyway"
                );
            }
            listener = self.path.as_deref().and_then(claim);
            let told = tokio::task::spawn_blocking(move || handover::tell_accepting(old)).await;
            match told {
                Ok(Ok(())) => tracing::info!("upgrade: accepting; the old instance stops"),
                _ => tracing::warn!(
                    "upgrade: could not tell the old instance; it serves on beside this one"
                ),
            }
        }
        if let Some(listener) = listener {
            loop {
                tokio::select! {
                    _ = shutdown.changed() => break,
                    accepted = listener.accept() => {
                        let Ok((conn, _)) = accepted else { continue };
                        if self.hand_over(conn).await {
                            tracing::info!("upgrade: the listening sockets are the new instance's; stopping");
                            stop_this_process();
                        }
                    }
                }
            }
        } else {
            let _ = shutdown.changed().await;
        }
        // Stopping: this instance's copies go, so its sockets close with its accept loops
        // (unless a new instance holds them).
        if let Ok(mut c) = self.copies.lock() {
            c.take();
        }
    }
}

/// Listens on the upgrade path, taking it from an instance this one replaces (which keeps its
/// own listener, unreachable, until it stops). `None` (logged): no upgrade can reach this
/// instance; it serves all the same.
fn claim(path: &Path) -> Option<tokio::net::UnixListener> {
    let _ = std::fs::remove_file(path);
    match tokio::net::UnixListener::bind(path) {
        Ok(l) => {
            // Only this user may take the sockets over.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            Some(l)
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), "cannot listen for upgrades: {e}; `--upgrade` will not find this instance");
            None
        }
    }
}

/// Stops this process as SIGTERM does (Pingora's graceful stop).
fn stop_this_process() {
    let me = nix::unistd::Pid::this();
    if let Err(e) = nix::sys::signal::kill(me, nix::sys::signal::Signal::SIGTERM) {
        tracing::error!("upgrade: cannot stop this instance ({e}); stop it with SIGTERM");
    }
}
