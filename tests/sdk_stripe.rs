//! Stripe's webhook signature scheme checked against code nobody here wrote: the official
//! `stripe` Python SDK verifies a header signed by the testkit (so the tests' signer is
//! Stripe's scheme), and the gateway accepts a header computed by the SDK (so the gateway's
//! verifier is too), then grants the event once.
//!
//! Needs a Python with `stripe` (`./dev test` sets up `.venv`); without one the test prints
//! `SKIPPED: …` and passes, unless `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI).

use std::process::Command;

use serde_json::json;
use tollgate_testkit::stripe::{event, event_id, now_secs, sign};
use tollgate_testkit::*;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/stripe_sdk.py");

fn run(py: &str, args: &[&str]) -> String {
    let out = Command::new(py).arg(SCRIPT).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "stripe_sdk.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn the_official_stripe_sdk_and_the_gateway_agree_on_signatures() {
    let Some(py) = python_with("import stripe") else {
        return skip("no Python with the stripe package; run ./dev test");
    };
    let stripe = FakeStripe::start().await;
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[billing]\nstripe_api_base = \"{}\"\nsecret_key_env = \"TOLLGATE_TEST_STRIPE_KEY\"\nwebhook_secret_env = \"TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET\"\n[billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_small\"\n",
        one_model_config(&fake, "m-2024-01-01"),
        stripe.base()
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let (uid, key) = gw.signup(&unique_email()).await;
    let dir = temp_dir();
    // The testkit's signer, verified by the SDK.
    let ev = event(&event_id(), "customer.created", json!({"id": "cus_1"}));
    let payload = serde_json::to_vec(&ev).unwrap();
    let file = dir.join("event.json");
    std::fs::write(&file, &payload).unwrap();
    let header = sign(&payload, WEBHOOK_SECRET, now_secs());
    let out = run(
        &py,
        &["verify", file.to_str().unwrap(), &header, WEBHOOK_SECRET],
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [ev["id"].as_str().unwrap(), "altered: refused"]
    );
    // The SDK's signature, accepted by the gateway; the grant applies once.
    let ev = event(
        &event_id(),
        "checkout.session.completed",
        json!({"id": "cs_sdk", "payment_status": "paid", "client_reference_id": uid,
               "metadata": {"credits_pack": "small"}}),
    );
    let payload = serde_json::to_vec(&ev).unwrap();
    std::fs::write(&file, &payload).unwrap();
    let header = run(&py, &["sign", file.to_str().unwrap(), WEBHOOK_SECRET]);
    let header = header.trim();
    let h = [
        ("Stripe-Signature", header),
        ("Content-Type", "application/json"),
    ];
    for duplicate in [false, true] {
        let r = request(gw.addr, "POST", "/api/v1/billing/webhook", &h, &payload).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["duplicate"], duplicate);
    }
    assert_eq!(gw.balance(&key).await, 1_100_000_000);
    // Signed by the SDK with a secret the gateway does not hold: refused.
    let header = run(&py, &["sign", file.to_str().unwrap(), "whsec_someone_else"]);
    let h = [
        ("Stripe-Signature", header.trim()),
        ("Content-Type", "application/json"),
    ];
    let r = request(gw.addr, "POST", "/api/v1/billing/webhook", &h, &payload).await;
    r.error(400, "invalid_request");
}
