//! Events sent to customers' endpoints: the event names an endpoint may choose, the signature
//! every delivery carries (`Tollgate-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret,
//! "<t>.<body>")>`) and its check, the retry schedule, and the budget percentages a charge
//! crosses. No I/O: the clock and the randomness are passed in.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Every event type an endpoint may subscribe to (`webhook.test` goes to the one endpoint
/// tested, whatever it chose).
pub const EVENT_TYPES: &[&str] = &[
    "balance.low",
    "budget.threshold",
    "key.expiring",
    "key.expired",
    "payment.received",
    "tool_server.status_changed",
];

/// The test event's type.
pub const TEST_EVENT: &str = "webhook.test";

/// The percentages of a budget or cap at which `budget.threshold` is sent.
pub const BUDGET_PERCENTS: [i64; 2] = [80, 100];

/// The header the signature travels in.
pub const SIGNATURE_HEADER: &str = "Tollgate-Signature";

pub fn known_event(name: &str) -> bool {
    EVENT_TYPES.contains(&name)
}

fn mac(secret: &str, t: i64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).ok()?;
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    Some(m)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The `Tollgate-Signature` value for `body` sent at `t` (Unix seconds).
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let sig = mac(secret, t, body)
        .map(|m| hex(&m.finalize().into_bytes()))
        .unwrap_or_default();
    format!("t={t},v1={sig}")
}

/// Why a signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    Malformed,
    /// Its timestamp is further than the tolerance from now (a replay).
    Stale,
    Mismatch,
}

/// Checks a `Tollgate-Signature` value over the raw `body` at `now` (Unix seconds), accepting
/// timestamps within `tolerance` seconds; any of several `v1` values may match (a receiver
/// rotating its secret).
pub fn verify(
    header: &str,
    body: &[u8],
    secret: &str,
    now: i64,
    tolerance: i64,
) -> Result<(), SignatureError> {
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => sigs.push(unhex(v).ok_or(SignatureError::Malformed)?),
            _ => {}
        }
    }
    let t = t.ok_or(SignatureError::Malformed)?;
    if sigs.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if (now - t).abs() > tolerance {
        return Err(SignatureError::Stale);
    }
    let ok = sigs
        .iter()
        .any(|s| mac(secret, t, body).is_some_and(|m| m.verify_slice(s).is_ok()));
    if ok {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// The wait (ms) before attempt `attempt + 1` after `attempt` failures (1 for the first
/// failure): `base_ms` doubled each time, capped at `max_ms`, then spread by `jitter` in
/// `[0, 1)` over its upper half (so retries of many endpoints down together do not return in
/// step, and a wait never falls below half its step).
pub fn backoff_ms(attempt: u32, base_ms: u64, max_ms: u64, jitter: f64) -> u64 {
    let exp = attempt.saturating_sub(1).min(40);
    let step = base_ms.saturating_mul(1u64 << exp).min(max_ms);
    let half = step / 2;
    half + (half as f64 * jitter.clamp(0.0, 1.0)) as u64
}

/// The percentages of [`BUDGET_PERCENTS`] that spending from `before` to `after` (µcr) crossed
/// under `cap`: reached now and not before. A cap of 0 is crossed by nothing (it refuses
/// every request first).
pub fn crossed(before: i64, after: i64, cap: i64) -> Vec<i64> {
    if cap <= 0 {
        return Vec::new();
    }
    BUDGET_PERCENTS
        .iter()
        .copied()
        .filter(|p| {
            let line = i128::from(cap) * i128::from(*p);
            i128::from(before) * 100 < line && i128::from(after) * 100 >= line
        })
        .collect()
}

/// The percentages of [`BUDGET_PERCENTS`] that `spent` has reached under `cap`.
pub fn reached(spent: i64, cap: i64) -> Vec<i64> {
    crossed(i64::MIN / 200, spent, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_any_change_fails_it() {
        let h = sign("whsec_abc", 1_700_000_000, b"{\"a\":1}");
        assert!(h.starts_with("t=1700000000,v1="));
        assert_eq!(h.len(), "t=1700000000,v1=".len() + 64);
        assert_eq!(
            verify(&h, b"{\"a\":1}", "whsec_abc", 1_700_000_010, 300),
            Ok(())
        );
        assert_eq!(
            verify(&h, b"{\"a\":2}", "whsec_abc", 1_700_000_010, 300),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(&h, b"{\"a\":1}", "whsec_other", 1_700_000_010, 300),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(&h, b"{\"a\":1}", "whsec_abc", 1_700_001_000, 300),
            Err(SignatureError::Stale)
        );
        for bad in ["", "t=1", "v1=00", "t=x,v1=00", "t=1,v1=zz"] {
            assert!(verify(bad, b"", "s", 1, 300).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_signature_is_hmac_sha256_over_timestamp_dot_body() {
        // The value Python's `hmac.new(b"key", b"1.body", hashlib.sha256)` gives.
        let h = sign("key", 1, b"body");
        let expected = "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5";
        assert_eq!(h, expected);
        // Verifying with a second, rotated secret listed first still finds the match.
        let two = format!("t=1,v1={},{}", "00".repeat(32), &h["t=1,".len()..]);
        assert_eq!(verify(&two, b"body", "key", 1, 300), Ok(()));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_jitters_in_the_upper_half() {
        assert_eq!(backoff_ms(1, 1000, 3_600_000, 0.0), 500);
        assert_eq!(backoff_ms(1, 1000, 3_600_000, 0.999), 999);
        assert_eq!(backoff_ms(2, 1000, 3_600_000, 0.0), 1000);
        assert_eq!(backoff_ms(4, 1000, 3_600_000, 0.0), 4000);
        assert_eq!(backoff_ms(30, 1000, 3_600_000, 0.0), 1_800_000);
        assert_eq!(backoff_ms(200, 1000, 3_600_000, 1.0), 3_600_000);
        assert_eq!(backoff_ms(0, 1000, 3_600_000, 0.0), 500);
    }

    #[test]
    fn a_percentage_is_crossed_once() {
        assert_eq!(crossed(0, 79, 100), Vec::<i64>::new());
        assert_eq!(crossed(79, 80, 100), vec![80]);
        assert_eq!(crossed(80, 99, 100), Vec::<i64>::new());
        assert_eq!(crossed(50, 100, 100), vec![80, 100]);
        assert_eq!(crossed(100, 150, 100), Vec::<i64>::new());
        assert_eq!(crossed(0, 10, 0), Vec::<i64>::new());
        assert_eq!(reached(85, 100), vec![80]);
        assert_eq!(reached(0, 100), Vec::<i64>::new());
    }

    #[test]
    fn event_names_are_known_or_not() {
        assert!(known_event("budget.threshold"));
        assert!(!known_event("webhook.test"));
        assert!(!known_event("budget"));
    }
}
