use super::context::*;

const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn a_valid_traceparent_is_read_and_written_back_alike() {
    let p = parse_traceparent(GOOD.as_bytes()).unwrap();
    assert_eq!(p.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
    assert_eq!(p.span_id, 0x00f067aa0ba902b7);
    assert!(p.sampled());
    let out = format_traceparent(p.trace_id, p.span_id, true);
    assert_eq!(std::str::from_utf8(&out).unwrap(), GOOD);
    let unsampled = format_traceparent(1, 2, false);
    assert_eq!(
        std::str::from_utf8(&unsampled).unwrap(),
        "00-00000000000000000000000000000001-0000000000000002-00"
    );
    // Surrounding blanks (an OWS in a header value) are not part of it.
    assert!(parse_traceparent(format!("  {GOOD} ").as_bytes()).is_some());
}

#[test]
fn garbage_traceparents_are_ignored() {
    let bad = [
        "",
        "00",
        "garbage",
        // Upper-case hex, all-zero ids, a bad separator, version ff, a short field.
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-011",
        // Version 00 with anything after it; a later version glued to more text.
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
    ];
    for b in bad {
        assert_eq!(parse_traceparent(b.as_bytes()), None, "{b:?}");
    }
    // Non-UTF-8 and very long input.
    assert_eq!(parse_traceparent(&[0xff; 55]), None);
    assert_eq!(parse_traceparent(&[b'0'; 10_000]), None);
    // A later version is read by its first four fields.
    let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-whatever";
    assert!(parse_traceparent(later.as_bytes()).is_some_and(|p| !p.sampled()));
}

#[test]
fn tracestate_is_passed_on_only_when_it_is_printable_and_short() {
    assert_eq!(
        valid_tracestate(b"congo=t61rcWkgMzE"),
        Some("congo=t61rcWkgMzE")
    );
    assert_eq!(valid_tracestate(b""), None);
    assert_eq!(valid_tracestate(b"a=b\r\nX-Evil: 1"), None);
    assert_eq!(valid_tracestate(&[b'a'; MAX_TRACESTATE + 1]), None);
    assert_eq!(valid_tracestate(&[0xc3, 0xa9]), None);
}

#[test]
fn the_ratio_sampler_keeps_that_share_of_trace_ids_and_decides_on_the_id() {
    assert!(!sampled_by_ratio(0, ratio_threshold(0.0)));
    assert!(sampled_by_ratio(u128::MAX, ratio_threshold(1.0)));
    assert_eq!(ratio_threshold(f64::NAN), 0);
    assert_eq!(ratio_threshold(-1.0), 0);
    let t = ratio_threshold(0.25);
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut kept = 0;
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let id = u128::from(x) << 64 | u128::from(x.rotate_left(17));
        if sampled_by_ratio(id, t) {
            kept += 1;
        }
        assert_eq!(sampled_by_ratio(id, t), sampled_by_ratio(id, t));
    }
    assert!((2_200..2_800).contains(&kept), "{kept} of 10000 at 0.25");
}

#[test]
fn child_span_ids_are_distinct_and_never_zero() {
    let mut seen = std::collections::HashSet::new();
    for server in [0u64, 1, u64::MAX, 0xdead_beef] {
        for tag in 0..1_000u64 {
            let id = child_span_id(server, tag);
            assert_ne!(id, 0);
            assert!(seen.insert(id), "{server} {tag}");
        }
    }
}
