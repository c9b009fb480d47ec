//! What caching saved, per wallet: an organization's keys share its entries (one wallet) and
//! its usage shows the saving; a provider's cache reads are counted at the input rate less the
//! cache-read rate.

use serde_json::json;
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

use crate::common::*;

#[tokio::test]
async fn an_organizations_keys_share_its_entries_and_its_usage_shows_the_saving() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let org = gw
        .api_as(&gw.key, "POST", "/api/v1/orgs", &json!({"name": "cached"}))
        .await;
    assert_eq!(org.status, 201, "{}", org.text());
    let org = org.json()["id"].as_str().unwrap().to_owned();
    gw.admin_credits(&org, 100.0).await;
    let (one, two) = (
        org_key(&gw, &org, "one").await,
        org_key(&gw, &org, "two").await,
    );
    let b = body("Asked on behalf of the organization", false);
    let first = chat(&gw, &one, &b, ON).await;
    assert_eq!(said(&first), Some("miss"), "{}", first.text());
    let cost = charged(&first);
    assert_eq!(
        said(&chat(&gw, &two, &b, ON).await),
        Some("hit"),
        "one wallet"
    );
    // The owner's own account is another wallet.
    assert_eq!(said(&chat(&gw, &gw.key, &b, ON).await), Some("miss"));
    assert_eq!(fake.chat_count(), 2);
    let usage = gw
        .api_as(
            &gw.key,
            "GET",
            &format!("/api/v1/orgs/{org}/usage"),
            &json!({}),
        )
        .await
        .json();
    let s = &usage["savings"];
    assert_eq!(s["response_cache_hits"], 1, "{usage}");
    assert_eq!(micros(&s["response_cache"]), cost, "{usage}");
    assert_eq!(micros(&s["total"]), cost, "{usage}");
    let mine = &gw.usage(&gw.key).await["savings"];
    assert_eq!(mine["response_cache_hits"], 0, "{mine}");
}

#[tokio::test]
async fn provider_cache_reads_are_counted_at_the_input_rate_less_the_cache_read_rate() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Cached(400, 0))
        .start()
        .await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", "cache_read_credits_per_1k = 0.25"),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    for _ in 0..2 {
        assert_eq!(
            chat(&gw, &gw.key, &body("cached prompt", false), &[])
                .await
                .status,
            200
        );
    }
    let s = &gw.usage(&gw.key).await["savings"];
    // 400 tokens at 1 credit per 1K less 0.25, twice.
    assert_eq!(micros(&s["cache_reads"]), 2 * 300_000, "{s}");
    assert_eq!(micros(&s["response_cache"]), 0, "{s}");
}

/// A new key of organization `org`, owned by the gateway's account.
async fn org_key(gw: &Gateway, org: &str, name: &str) -> String {
    let body = json!({"name": name, "organization_id": org});
    let r = gw.api_as(&gw.key, "POST", "/api/v1/keys", &body).await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()["key"].as_str().unwrap().to_owned()
}
