//! A real receiver gets signed events: the test event of `POST /api/v1/webhooks/{id}/test`
//! carries its id, type and signature headers, and its signature verifies with the Python
//! snippet the README documents (run as it is written) and fails on a changed body or another
//! secret; the delivery log shows it delivered; a rotated secret signs from then on.

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

use super::{endpoint, gateway, log, WAIT};

/// The README's verification snippet (the first `python` block of its `## Webhooks` section).
fn readme_snippet() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = &readme[readme.find("\n## Webhooks").expect("a Webhooks section")..];
    let start = section.find("```python\n").expect("a python block") + "```python\n".len();
    let end = start + section[start..].find("```").expect("the block's end");
    section[start..end].to_owned()
}

/// Runs the snippet's `verify(secret, header, body)` on what the receiver got.
fn python_verifies(py: &str, secret: &str, header: &str, body: &[u8]) -> bool {
    let dir = temp_dir();
    std::fs::write(dir.join("body"), body).unwrap();
    let script = format!(
        "{}\nimport sys\nbody = open(sys.argv[3], 'rb').read()\nprint('valid' if verify(sys.argv[1], sys.argv[2], body) else 'invalid')\n",
        readme_snippet()
    );
    std::fs::write(dir.join("check.py"), script).unwrap();
    let out = std::process::Command::new(py)
        .arg(dir.join("check.py"))
        .arg(secret)
        .arg(header)
        .arg(dir.join("body"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success() && (text == "valid" || text == "invalid"),
        "the README's snippet failed: {} {}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text == "valid"
}

#[tokio::test]
async fn a_test_event_arrives_signed_and_verifies_with_the_readme_snippet() {
    let Some(py) = python_with("import hmac, hashlib") else {
        return skip("no Python to run the README's verification snippet");
    };
    let (_f, gw) = gateway().await;
    let rx = Receiver::start().await;
    let (id, secret) = endpoint(&gw, &gw.key, &rx.url("/hooks?x=1"), &["balance.low"]).await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    // The secret is shown once: never again.
    let got = gw
        .api_as(
            &gw.key,
            "GET",
            &format!("/api/v1/webhooks/{id}"),
            &json!({}),
        )
        .await;
    assert_eq!(got.status, 200);
    assert!(!got.text().contains(&secret) && got.json().get("secret").is_none());

    let r = gw
        .api_as(
            &gw.key,
            "POST",
            &format!("/api/v1/webhooks/{id}/test"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
    let evt = r.json()["event_id"].as_str().unwrap().to_owned();
    let d = rx.wait_for("webhook.test", WAIT).await;
    assert_eq!(d.request.path, "/hooks?x=1");
    assert_eq!(d.request.method, "POST");
    assert_eq!(d.event_id(), evt);
    assert_eq!(d.header("tollgate-event-type"), Some("webhook.test"));
    let v = d.json();
    assert_eq!(v["id"], evt.as_str());
    assert_eq!(v["account_id"], gw.user_id.as_str());
    assert_eq!(v["data"]["endpoint_id"], id.as_str());
    assert!(v["created"].as_i64().unwrap() > 1_700_000_000, "{v}");
    let sig = d.header("tollgate-signature").unwrap().to_owned();
    assert!(sig.starts_with("t=") && sig.contains(",v1="), "{sig}");
    assert!(python_verifies(&py, &secret, &sig, &d.request.body));
    let mut changed = d.request.body.clone();
    changed.push(b' ');
    assert!(!python_verifies(&py, &secret, &sig, &changed));
    assert!(!python_verifies(&py, "whsec_other", &sig, &d.request.body));

    // The log shows it delivered, once, with the receiver's status.
    let start = std::time::Instant::now();
    loop {
        let rows = log(&gw, &gw.key, &id).await;
        if rows.first().is_some_and(|r| r["status"] == "delivered") {
            assert_eq!(rows.len(), 1, "{rows:?}");
            assert_eq!(rows[0]["event_id"], evt.as_str());
            assert_eq!(rows[0]["type"], "webhook.test");
            assert_eq!(rows[0]["attempts"], 1);
            assert_eq!(rows[0]["last_status"], 200);
            break;
        }
        assert!(start.elapsed() < WAIT, "never marked delivered: {rows:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A rotated secret signs the next event; the old one no longer verifies it.
    let r = gw
        .api_as(
            &gw.key,
            "POST",
            &format!("/api/v1/webhooks/{id}/rotate_secret"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let new_secret = r.json()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    gw.api_as(
        &gw.key,
        "POST",
        &format!("/api/v1/webhooks/{id}/test"),
        &json!({}),
    )
    .await;
    let got = rx
        .wait_until(WAIT, "a second test event", |d| d.len() >= 2)
        .await;
    let d = &got[1];
    let sig = d.header("tollgate-signature").unwrap();
    assert!(python_verifies(&py, &new_secret, sig, &d.request.body));
    assert!(!python_verifies(&py, &secret, sig, &d.request.body));
}
