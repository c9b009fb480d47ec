//! A key's budget crossing 80 % under 20 concurrent requests sends one `budget.threshold`
//! event, not 20: on two instances sharing Redis (one instance without Redis).

use std::time::Duration;

use serde_json::json;
use tollgate_testkit::*;

use super::{ask, config, endpoint, WAIT};

#[tokio::test]
async fn twenty_concurrent_requests_crossing_eighty_percent_send_one_event() {
    let (_f, cfg) = config("").await;
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = match redis_url() {
        Some(_) => Some(gw.second(tollgate_bin!(), &cfg).await),
        None => {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"two instances need Redis (TOLLGATE_TEST_REDIS_URL): one instance here\n",
            );
            None
        }
    };
    let rx = Receiver::start().await;
    let (_id, _) = endpoint(&gw, &gw.key, &rx.url("/b"), &["budget.threshold"]).await;
    // 0.21 credits a request: 20 of them spend 4.2 of a 5-credit budget, past 80 % (4).
    let r = gw
        .api_as(
            &gw.key,
            "POST",
            "/api/v1/keys",
            &json!({"name": "budgeted", "budget_credits": 5, "budget_period": "month"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let (key, key_id) = (
        r.json()["key"].as_str().unwrap().to_owned(),
        r.json()["id"].as_str().unwrap().to_owned(),
    );
    // Both instances know the wallet has an endpoint (each refreshes on its poll).
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let gw = if i % 2 == 1 {
            other.as_ref().unwrap_or(&gw)
        } else {
            &gw
        };
        let (addr, key) = (gw.addr, key.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 100});
            let b = serde_json::to_vec(&body).unwrap();
            let auth = format!("Bearer {key}");
            request(
                addr,
                "POST",
                "/v1/chat/completions",
                &[
                    ("Authorization", &auth),
                    ("Content-Type", "application/json"),
                ],
                &b,
            )
            .await
            .status
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let d = rx.wait_for("budget.threshold", WAIT).await;
    // Time for any duplicate to arrive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = rx.of_type("budget.threshold");
    assert_eq!(
        all.len(),
        1,
        "one event, not one per request: {:?}",
        all.iter().map(|d| d.json()).collect::<Vec<_>>()
    );
    let v = d.json();
    assert_eq!(v["account_id"], gw.user_id.as_str());
    let data = &v["data"];
    assert_eq!(data["subject"], "key");
    assert_eq!(data["key_id"], key_id.as_str());
    assert_eq!(data["percent"], 80);
    assert_eq!(data["period"], "month");
    assert_eq!(data["budget"], json!(5.0));
    assert!(data["spent"].as_f64().unwrap() >= 4.0, "{data}");
    assert!(
        data["period_start"].as_i64().unwrap() % 86_400 == 0,
        "{data}"
    );
    // Another request below 100 % sends nothing more.
    assert_eq!(ask(&gw, &key).await, 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(rx.of_type("budget.threshold").len(), 1);
}
