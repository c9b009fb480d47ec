//! The arithmetic of one credit lease (`lease.rs`), free of I/O.

use std::time::{Duration, Instant};

use super::lease::*;
use crate::ledger::{LeaseSynced, Settlement};

#[test]
fn a_lease_that_ran_dry_doubles_up_to_its_cap() {
    let now = Instant::now();
    let mut l = Lease::new("l".into(), (0, 100, 10_000), now, now + HOUR);
    l.enlarge(50, 1_000);
    assert_eq!(l.target, 200);
    l.enlarge(50, 1_000);
    l.enlarge(50, 1_000);
    l.enlarge(50, 1_000);
    assert_eq!(l.target, 1_000);
    // A hold larger than the cap still gets a lease that can pay for it.
    l.enlarge(5_000, 1_000);
    assert_eq!(l.target, 5_000);
    // Never shrinks: a smaller balance only stops the growth.
    l.enlarge(50, 10);
    assert_eq!(l.target, 5_000);
}

fn settlement(cost: i64) -> Settlement {
    Settlement {
        hold_id: "req".into(),
        request_id: "req".into(),
        account_id: "usr".into(),
        key_id: None,
        model_requested: "m".into(),
        model_used: Some("m".into()),
        provider: Some("p".into()),
        prompt_tokens: 1,
        completion_tokens: 1,
        cost,
        status: 200,
        latency_ms: 1,
        now_ms: 0,
        hold_note: None,
        saving: Default::default(),
        tool: None,
    }
}

const HOUR: Duration = Duration::from_secs(3600);

fn lease(held: i64) -> (Lease, Instant) {
    let now = Instant::now();
    (
        Lease::new("lease_1".into(), (held, held, 5_000), now, now + HOUR),
        now,
    )
}

#[test]
fn holds_take_whole_amounts_and_never_more_than_is_left() {
    let (mut l, now) = lease(1_000);
    let h = l.take(600, now).unwrap();
    assert_eq!(
        (h.held, h.balance, l.available, l.inflight),
        (600, 5_400, 400, 1)
    );
    assert!(l.take(401, now).is_none(), "a partial hold is never taken");
    assert!(l.take(400, now).is_some());
    assert_eq!((l.available, l.inflight), (0, 2));
}

#[test]
fn settlement_refunds_the_rest_and_clamps_the_charge() {
    let (mut l, now) = lease(1_000);
    l.take(600, now).unwrap();
    assert_eq!(l.settle(600, settlement(250), now), (250, 5_750));
    assert_eq!((l.available, l.inflight, l.pending.len()), (750, 0, 1));
    assert_eq!(l.pending[0].0.cost, 250);
    // A cost above the hold takes from the unheld rest, never below zero.
    l.take(100, now).unwrap();
    assert_eq!(l.settle(100, settlement(10_000), now), (750, 5_000));
    assert_eq!(l.available, 0);
    // A negative cost (never produced, but not trusted) charges nothing.
    l.available = 10;
    l.take(10, now).unwrap();
    assert_eq!(l.settle(10, settlement(-5), now).0, 0);
}

#[test]
fn a_hold_grows_only_from_what_the_open_lease_has_unheld() {
    let (mut l, now) = lease(100);
    let h = l.take(60, now).unwrap();
    assert!(!l.grow(41));
    assert!(l.grow(40));
    assert_eq!(l.available, 0);
    // The grown hold settles as one: the charge comes out of all 100 it holds.
    assert_eq!(l.settle(h.held + 40, settlement(90), now), (90, 5_010));
    assert_eq!(l.available, 10);
    l.closing = true;
    assert!(!l.grow(1));
}

#[test]
fn a_release_with_holds_in_flight_drains_instead() {
    let (mut l, now) = lease(1_000);
    l.take(300, now).unwrap();
    l.settle(300, settlement(100), now);
    l.take(200, now).unwrap();
    let start = l.start_round(Round::Release);
    assert!(!start.release && l.closing);
    assert_eq!(
        (start.give_back, start.rows.len(), l.available),
        (700, 1, 0)
    );
    assert!(l.take(1, now).is_none(), "a closing lease takes no holds");
    // The round failed: rows and give-back come back for the next try.
    l.round_failed(start);
    assert_eq!((l.available, l.pending.len()), (700, 1));
    l.settle(200, settlement(0), now);
    assert!(
        l.start_round(Round::Release).release,
        "no holds left: released"
    );
}

#[test]
fn a_committed_round_moves_the_top_up_in() {
    let (mut l, now) = lease(100);
    let done = LeaseSynced {
        lost: false,
        charged: 0,
        topped_up: 900,
        released: false,
        balance: 4_100,
        others: 300,
    };
    l.round_done(&done, now, now + HOUR);
    assert_eq!((l.available, l.db_balance), (1_000, 4_100));
    // Shown: the ledger's balance, this lease's unheld part, the others' unspent part.
    assert_eq!(l.shown_balance(), 5_400);
}

#[test]
fn a_lease_past_its_expiry_or_with_too_many_unwritten_rows_takes_no_holds() {
    let (mut l, now) = lease(1_000);
    l.valid_until = now + Duration::from_secs(1);
    assert!(l.take(10, now).is_some());
    assert!(
        l.take(10, now + Duration::from_secs(1)).is_none(),
        "the reaper may have refunded it"
    );
    let (mut l, now) = lease(1_000_000);
    for _ in 0..MAX_PENDING_ROWS {
        l.take(1, now).unwrap();
        l.settle(1, settlement(1), now);
    }
    assert!(l.take(1, now).is_none(), "rows the ledger has not taken");
    // A failed round keeps the rows and marks the lease failing; a committed one clears it.
    let start = l.start_round(Round::Flush);
    l.round_failed(start);
    assert!(l.failing && l.pending.len() == MAX_PENDING_ROWS);
    let done = LeaseSynced {
        lost: false,
        charged: 0,
        topped_up: 0,
        released: false,
        balance: 0,
        others: 0,
    };
    l.start_round(Round::Flush);
    l.round_done(&done, now, now + HOUR);
    assert!(!l.failing);
    assert!(l.take(1, now).is_some());
}

#[test]
fn the_due_round_follows_the_lease_state() {
    let idle = Duration::from_secs(2);
    let renew = Duration::from_secs(1);
    let (mut l, t0) = lease(1_000);
    assert_eq!(l.due(t0, idle, renew), None);
    assert_eq!(l.due(t0 + renew, idle, renew), Some(Round::Flush));
    assert_eq!(l.due(t0 + idle, idle, renew), Some(Round::Release));
    l.take(600, t0).unwrap();
    assert_eq!(l.due(t0 + idle, idle, renew), Some(Round::TopUp(600)));
    l.settle(600, settlement(1), t0);
    assert_eq!(l.due(t0, idle, renew), Some(Round::Flush), "rows wait");
    l.take(10, t0).unwrap();
    l.closing = true;
    assert_eq!(l.due(t0, idle, renew), Some(Round::Flush));
    l.pending.clear();
    assert_eq!(l.due(t0, idle, renew), None, "draining, nothing to write");
    l.settle(10, settlement(0), t0);
    assert_eq!(l.due(t0, idle, renew), Some(Round::Release));
}

/// A busy account's round comes early once `BATCH_WAKE` settlements wait, not before: the timer
/// sets the pace below that (the wake is a stored permit, so a poll shows whether it was given).
#[tokio::test]
async fn a_round_is_woken_early_only_once_a_full_batch_waits() {
    use std::sync::Arc;
    let leases = super::Leases::new(
        64,
        Duration::from_millis(20),
        Duration::from_secs(2),
        Duration::from_secs(10),
        "inst".into(),
    );
    let (l, now) = lease(1_000_000_000);
    let id = l.id.clone();
    let mut entry = super::Entry::new();
    entry.lease = Some(l);
    super::locked(&leases.accounts).insert("usr".into(), entry);
    let woken = |leases: &super::Leases| {
        use std::future::Future;
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let notified = std::pin::pin!(leases.wake.notified());
        notified.poll(&mut cx).is_ready()
    };
    for _ in 0..super::BATCH_WAKE - 1 {
        let hold = super::locked(&leases.accounts)
            .get_mut("usr")
            .and_then(|e| e.lease.as_mut())
            .and_then(|l| l.take(1, now));
        assert!(hold.is_some());
        assert!(leases.settle(&id, 1, settlement(1)).is_ok());
    }
    assert!(
        !woken(&leases),
        "{} rows wait: the timer's turn",
        super::BATCH_WAKE - 1
    );
    super::locked(&leases.accounts)
        .get_mut("usr")
        .and_then(|e| e.lease.as_mut())
        .and_then(|l| l.take(1, now));
    assert!(leases.settle(&id, 1, settlement(1)).is_ok());
    assert!(woken(&leases), "a full batch wakes the round");
    // A settlement against a lease that is gone comes back to be settled directly.
    let other: Arc<str> = Arc::from("lease_gone");
    assert!(leases.settle(&other, 1, settlement(1)).is_err());
}
