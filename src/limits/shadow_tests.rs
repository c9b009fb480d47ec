//! The shadow's decisions, what it hands the recovery, and the handoff's states.

use std::collections::VecDeque;

use tollgate_filters::ratelimit::{check_and_count, Decision, SlidingLog, Window, DAY_MS, HOUR_MS};

use super::*;

const T0: i64 = 1_700_000_000_000;

fn windows(hour: u64, day: u64) -> [Window; 2] {
    [
        Window {
            window_ms: HOUR_MS,
            limit: hour,
        },
        Window {
            window_ms: DAY_MS,
            limit: day,
        },
    ]
}

fn same(a: &Decision, b: &Decision) -> bool {
    (a.admitted, a.limit, a.remaining, a.reset_ms, a.retry_ms)
        == (b.admitted, b.limit, b.remaining, b.reset_ms, b.retry_ms)
}

#[test]
fn its_decisions_are_those_of_the_in_process_counter() {
    // Requests every 7 minutes for two days against 5 an hour and 30 a day: both limits bind
    // in turn; one sorted log decides as check_and_count's two logs do.
    let w = windows(5, 30);
    let (mut hour, mut day) = (SlidingLog::default(), SlidingLog::default());
    let mut log: VecDeque<Entry> = VecDeque::new();
    for i in 0..(2 * 24 * 60 / 7) {
        let now = T0 + i * 7 * 60_000;
        let expected = check_and_count(&mut [&mut hour, &mut day], &w, now);
        let d = decide(&log, &w, now);
        assert!(same(&d, &expected), "at {i}: {d:?} vs {expected:?}");
        if d.admitted {
            log.push_back((now, Member::new(format!("{now}:r{i}"))));
        }
    }
}

#[test]
fn what_redis_admitted_before_an_outage_counts_in_process_during_it() {
    let s = Shadow::default();
    let w = windows(20, 100);
    for i in 0..12 {
        s.record(
            "acct:a",
            &w,
            T0 + i,
            Member::new(format!("{}:r{i}", T0 + i)),
        );
    }
    // Healthy: the limiter decides in Redis, not here.
    assert!(s.admit_local("acct:a", &w, "x", T0 + 100, false).is_none());
    s.failed();
    assert_eq!(s.health(), Health::Degraded);
    let admitted = (0..12)
        .filter_map(|i| s.admit_local("acct:a", &w, &format!("o{i}"), T0 + 200 + i, false))
        .filter(|d| d.admitted)
        .count();
    assert_eq!(admitted, 8);
    assert_eq!(s.used("acct:a", &w, T0 + 300), vec![20, 20]);
}

#[test]
fn a_restored_redis_gets_the_unsent_or_everything_with_the_original_members() {
    let s = Shadow::default();
    let w = windows(20, 100);
    s.record("acct:a", &w, T0, Member::new(format!("{T0}:r0")));
    s.failed();
    let d = s.admit_local("acct:a", &w, "o1", T0 + 5, false);
    assert!(d.is_some_and(|d| d.admitted));
    // A Redis that lost everything gets every admission; the unsent stay for the handoff.
    let all = s.take(true, T0 + 10);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].ident, "acct:a");
    assert_eq!(all[0].windows, vec![HOUR_MS, DAY_MS]);
    let members: Vec<String> = all[0].entries.iter().map(|e| e.1.to_string()).collect();
    assert_eq!(members, [format!("{T0}:r0"), format!("{}:o1", T0 + 5)]);
    // One that kept its data gets the unsent only, once taken.
    let unsent = s.take(false, T0 + 10);
    assert_eq!(unsent.len(), 1);
    assert_eq!(
        unsent[0].entries,
        vec![(T0 + 5, Member::new(format!("{}:o1", T0 + 5)))]
    );
    assert!(s.take(false, T0 + 10).is_empty());
    // A write that failed gives them back.
    s.put_back(unsent);
    assert_eq!(s.take(false, T0 + 10).len(), 1);
}

#[test]
fn the_handoff_stops_in_process_decisions_and_ends_healthy_only_if_nothing_failed() {
    let s = Shadow::default();
    let w = windows(20, 100);
    s.failed();
    let failures = s.failures();
    assert!(s.admit_local("ip:1", &w, "a", T0, false).is_some());
    let last = s.begin_handoff(failures, T0 + 1).expect("degraded");
    assert_eq!(last.len(), 1);
    assert_eq!(s.health(), Health::Handoff);
    // Nothing is decided here while the last admissions are written...
    assert!(s.admit_local("ip:1", &w, "b", T0 + 2, false).is_none());
    assert!(s.end_handoff(failures, None));
    assert_eq!(s.health(), Health::Healthy);

    // ...unless Redis fails meanwhile: then the check is decided here and the handoff ends
    // degraded, its admission to be written next time.
    s.failed();
    let failures = s.failures();
    let last = s.begin_handoff(failures, T0 + 3).expect("degraded");
    assert!(last.is_empty());
    s.failed();
    assert!(s
        .admit_local("ip:1", &w, "c", T0 + 4, true)
        .is_some_and(|d| d.admitted));
    assert!(!s.end_handoff(failures, None));
    assert_eq!(s.health(), Health::Degraded);
    assert!(
        s.begin_handoff(failures, T0 + 5).is_none(),
        "a failure since"
    );
    let last = s.begin_handoff(s.failures(), T0 + 5).expect("degraded");
    assert_eq!(last[0].entries.len(), 1);
    // A handoff whose write failed puts it back and stays degraded.
    assert!(!s.end_handoff(s.failures(), Some(last)));
    assert_eq!(s.health(), Health::Degraded);
    assert_eq!(s.take(false, T0 + 6)[0].entries.len(), 1);
}

#[test]
fn the_sweep_drops_what_left_every_window() {
    let s = Shadow::default();
    let hour = [Window {
        window_ms: HOUR_MS,
        limit: 10,
    }];
    s.record("ip:1", &hour, T0, Member::new(format!("{T0}:a")));
    s.record("ip:2", &windows(10, 10), T0, Member::new(format!("{T0}:b")));
    assert_eq!(s.sweep(T0 + HOUR_MS - 1), 2);
    // ip:2's day window still counts its admission.
    assert_eq!(s.sweep(T0 + HOUR_MS), 1);
    assert_eq!(s.sweep(T0 + DAY_MS), 0);
}

#[test]
fn forgetting_an_ident_forgets_its_unsent_admissions() {
    let s = Shadow::default();
    let w = windows(1, 1);
    s.failed();
    assert!(s.admit_local("login:x", &w, "a", T0, false).is_some());
    assert!(!s
        .admit_local("login:x", &w, "b", T0 + 1, false)
        .is_some_and(|d| d.admitted));
    s.forget("login:x");
    assert!(s.take(false, T0 + 2).is_empty());
    assert!(s
        .admit_local("login:x", &w, "c", T0 + 3, false)
        .is_some_and(|d| d.admitted));
}

#[test]
fn a_reservation_s_members_share_their_base_and_are_written_out_whole() {
    let base: std::sync::Arc<str> = std::sync::Arc::from("1700000000000:i1:7");
    assert_eq!(Member::new(base.clone()).to_string(), "1700000000000:i1:7");
    let third = Member::reserved(&base, 3);
    assert_eq!(third.to_string(), "1700000000000:i1:7:3");
    assert_ne!(third, Member::reserved(&base, 4));
    // One base for the reservation, not a string per admission.
    assert_eq!(std::sync::Arc::strong_count(&base), 2);
    assert_eq!(std::mem::size_of::<Entry>(), 32);
}
