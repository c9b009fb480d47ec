//! Stripe without I/O: the webhook signature check (the clock passed in), the form encoding of
//! API requests (bracket notation), and the events the webhook acts on, parsed into an
//! [`Action`] each ([`Event::parse`]).
//!
//! The signature scheme (Stripe's "manual verification"): the `Stripe-Signature` header holds
//! `t=<unix seconds>` and one or more `v1=<hex HMAC-SHA256 of "t.payload">` entries (several
//! while Stripe rolls a secret); other schemes (`v0`) are ignored. A header is accepted when any
//! `v1` matches any of our secrets and `t` is within the tolerance of now, both ways.

mod event;
#[cfg(test)]
mod tests_event;

pub use event::{
    int_at, invoice_subscription, price_ids, str_at, Action, Checkout, Clawback, ClawbackKind,
    Event, ParseError, Renewal, Subscription,
};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Stripe's own default tolerance: five minutes.
pub const TOLERANCE_SECS: i64 = 300;

/// Why a signature was refused (for the 400's message; never which secret nearly matched).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureError {
    Missing,
    Malformed,
    NoSecret,
    TooOld,
    InFuture,
    Mismatch,
}

impl std::fmt::Display for SignatureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SignatureError::Missing => "the Stripe-Signature header is missing",
            SignatureError::Malformed => {
                "the Stripe-Signature header is malformed (want t=<seconds>,v1=<hex>)"
            }
            SignatureError::NoSecret => "no webhook signing secret is configured",
            SignatureError::TooOld => {
                "the signature's timestamp is outside the tolerance (too old)"
            }
            SignatureError::InFuture => {
                "the signature's timestamp is outside the tolerance (in the future)"
            }
            SignatureError::Mismatch => "no signature matches the payload",
        })
    }
}

/// `None` never happens in practice (HMAC takes keys of any length); it counts as no match.
fn hmac_of(secret: &str, t: &str, payload: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).ok()?;
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(payload);
    Some(mac)
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Checks `header` over the raw `payload` against each of `secrets` at `now` (Unix seconds).
pub fn verify(
    header: Option<&str>,
    payload: &[u8],
    secrets: &[&str],
    now: i64,
    tolerance: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    if secrets.is_empty() {
        return Err(SignatureError::NoSecret);
    }
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        let (k, v) = part
            .trim()
            .split_once('=')
            .ok_or(SignatureError::Malformed)?;
        match k {
            "t" => t = Some(v),
            "v1" => sigs.push(hex_decode(v).ok_or(SignatureError::Malformed)?),
            _ => {}
        }
    }
    let t_str = t.ok_or(SignatureError::Malformed)?;
    let ts: i64 = t_str.parse().map_err(|_| SignatureError::Malformed)?;
    if sigs.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if now.saturating_sub(ts) > tolerance {
        return Err(SignatureError::TooOld);
    }
    if ts.saturating_sub(now) > tolerance {
        return Err(SignatureError::InFuture);
    }
    for secret in secrets {
        for sig in &sigs {
            // `verify_slice` compares in constant time.
            if hmac_of(secret, t_str, payload).is_some_and(|m| m.verify_slice(sig).is_ok()) {
                return Ok(());
            }
        }
    }
    Err(SignatureError::Mismatch)
}

/// The secrets in a comma-separated list (rotation), blanks dropped.
pub fn secrets(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `application/x-www-form-urlencoded`, keys already in Stripe's bracket notation
/// (`line_items[0][price]`).
pub fn form(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode_into(&mut out, k);
        out.push('=');
        encode_into(&mut out, v);
    }
    out
}

fn encode_into(out: &mut String, s: &str) {
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn header(secret: &str, t: i64, payload: &[u8]) -> String {
        let sig = hmac_of(secret, &t.to_string(), payload)
            .unwrap()
            .finalize()
            .into_bytes();
        let hex: String = sig.iter().map(|b| format!("{b:02x}")).collect();
        format!("t={t},v1={hex}")
    }

    #[test]
    fn a_signature_is_checked_over_the_raw_body_with_tolerance_both_ways() {
        let body = br#"{"id":"evt_1"}"#;
        let now = 1_700_000_000;
        let h = header("whsec_a", now, body);
        assert_eq!(verify(Some(&h), body, &["whsec_a"], now, 300), Ok(()));
        // Rotation: the second secret matches.
        assert_eq!(
            verify(Some(&h), body, &["whsec_b", "whsec_a"], now, 300),
            Ok(())
        );
        assert_eq!(
            verify(Some(&h), body, &["whsec_b"], now, 300),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(Some(&h), br#"{"id":"evt_2"}"#, &["whsec_a"], now, 300),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(Some(&h), body, &["whsec_a"], now + 301, 300),
            Err(SignatureError::TooOld)
        );
        assert_eq!(
            verify(Some(&h), body, &["whsec_a"], now - 301, 300),
            Err(SignatureError::InFuture)
        );
        assert_eq!(verify(Some(&h), body, &["whsec_a"], now + 300, 300), Ok(()));
        assert_eq!(
            verify(None, body, &["whsec_a"], now, 300),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(Some(&h), body, &[], now, 300),
            Err(SignatureError::NoSecret)
        );
    }

    #[test]
    fn any_of_several_v1_entries_may_match_and_v0_is_ignored() {
        let body = b"{}";
        let now = 1_700_000_000;
        let good = header("whsec_a", now, body);
        let good_sig = good.split("v1=").nth(1).unwrap();
        let h = format!("t={now},v0=abcd,v1={},v1={good_sig}", "00".repeat(32));
        assert_eq!(verify(Some(&h), body, &["whsec_a"], now, 300), Ok(()));
    }

    #[test]
    fn malformed_headers_are_refused() {
        for h in [
            "",
            "garbage",
            "t=abc,v1=00",
            "v1=00",
            "t=1700000000",
            "t=1700000000,v1=zz",
            "t=1700000000,v1=abc",
        ] {
            assert_eq!(
                verify(Some(h), b"{}", &["s"], 1_700_000_000, 300),
                Err(SignatureError::Malformed),
                "{h}"
            );
        }
    }

    #[test]
    fn forms_use_percent_encoding_and_keep_brackets_in_keys_encoded() {
        assert_eq!(
            form(&[("line_items[0][price]", "price_1"), ("email", "a+b@x.io")]),
            "line_items%5B0%5D%5Bprice%5D=price_1&email=a%2Bb%40x.io"
        );
        assert_eq!(secrets(" a, ,b "), ["a", "b"]);
    }

    #[test]
    fn price_ids_are_read_in_both_api_shapes() {
        let v: Value = serde_json::json!({"data": [
            {"price": {"id": "price_a"}},
            {"pricing": {"price_details": {"price": "price_b"}}},
            {"description": "no price"}
        ]});
        assert_eq!(price_ids(&v), ["price_a", "price_b"]);
        let inv =
            serde_json::json!({"parent": {"subscription_details": {"subscription": "sub_1"}}});
        assert_eq!(invoice_subscription(&inv), Some("sub_1"));
    }
}
