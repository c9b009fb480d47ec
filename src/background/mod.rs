//! The background services, one file each, all on Pingora's long-lived runtimes (the sqlx and
//! redis pools must be created inside one): connecting the ledger ([`ledger`]) and the counter
//! store ([`counters`]), health checks ([`health`]), the SIGHUP reload ([`reload`]), the
//! credit-lease rounds ([`leases`]), the retry of settlements that failed after serving
//! ([`unsettled`]), the hold reaper ([`reaper`]), the sweep of the
//! in-process rate-limit counters ([`limiter_sweep`]), the renewal of this instance's slots
//! under in-flight limits ([`in_flight`]), the refresh of tool servers' tool
//! lists ([`tool_lists`]) and of providers' addresses ([`names`]), the handover of the
//! listening sockets to an instance replacing this one ([`upgrades`]), events sent to
//! customers, checked and delivered ([`webhooks`]), and the export of trace spans to an OTLP
//! collector ([`traces`], only when traces are on).

pub mod counters;
pub mod health;
pub mod in_flight;
pub mod leases;
pub mod ledger;
pub mod limiter_sweep;
pub mod names;
pub mod reaper;
pub mod reload;
pub mod tool_lists;
pub mod traces;
pub mod unsettled;
pub mod upgrades;
pub mod webhooks;

use std::time::Duration;

use pingora::server::ShutdownWatch;

use crate::ledger::Ledger;
use crate::runtime::Shared;

/// Waits until the ledger service has connected; `None` when the process stops first.
async fn ledger_when_connected(shared: &Shared, shutdown: &mut ShutdownWatch) -> Option<Ledger> {
    loop {
        if let Some(l) = shared.ledger.get() {
            return Some(l.clone());
        }
        tokio::select! {
            _ = shutdown.changed() => return None,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}
