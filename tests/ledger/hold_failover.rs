//! The credit hold across a failover (DESIGN.md, Rules: Credits): the hold is sized for the
//! first candidate at its own rates; before a later candidate whose bound is higher it is
//! topped up to that bound, or, when the balance cannot, that attempt's `max_tokens` is lowered
//! to what the hold pays for, or the candidate is skipped; the usage row records which. Runs on
//! SQLite + in-process counters, and on Postgres + Redis when set; with credit leases (the
//! default) and without (holds in the database).

use serde_json::json;
use tollgate_testkit::*;

/// `cheap` (1 / 2 credits per 1K) first, `dear` (3 / 5) its sibling in the tier.
fn config(a: &FakeOpenAi, b: &FakeOpenAi) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("p1", &[a], ""),
        provider("p2", &[b], ""),
        "[[models]]\nid = \"cheap\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n\n",
        "[[models]]\nid = \"dear\"\nprovider = \"p2\"\ntier = \"economy\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 5\nmax_output_tokens = 1000\n\n",
    )
}

/// The gateway's prompt estimate: a token per 3 bytes of the body as sent.
fn estimate(body: &serde_json::Value) -> i64 {
    (serde_json::to_vec(body).unwrap().len() as i64 + 2) / 3
}

fn dear_cost(row: &serde_json::Value) -> i64 {
    let (p, c) = (
        row["prompt_tokens"].as_i64().unwrap(),
        row["completion_tokens"].as_i64().unwrap(),
    );
    p * 3_000 + c * 5_000
}

async fn tops_up(leases: bool) {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let opts = Opts {
        storage: if leases { "" } else { "lease_holds = 0" }.into(),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &config(&a, &b), opts).await;
    a.set_mode(Mode::Status(500));
    let before = gw.balance(&gw.key).await;
    for (stream, max_tokens) in [(false, None), (true, Some(700))] {
        let mut body = json!({"model":"cheap","messages":user("hi"),"stream":stream});
        if let Some(m) = max_tokens {
            body["max_tokens"] = m.into();
        }
        let r = gw.chat(body).await;
        assert_eq!(r.status, 200, "{}", r.text());
        // The whole request went to the pricier sibling, as asked.
        let up = b.requests().last().unwrap().json();
        assert_eq!(up["max_tokens"], max_tokens.unwrap_or(1000), "{up}");
    }
    let u = gw.usage(&gw.key).await;
    let rows = u["recent"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["model_used"], "dear");
        assert_eq!(row["hold_note"], "dear: hold topped up", "{row}");
    }
    // Charged exactly at dear's rates; the topped-up part of each hold came back.
    let charged: i64 = rows.iter().map(dear_cost).sum();
    assert_eq!(before - gw.balance(&gw.key).await, charged);
}

#[tokio::test]
async fn a_failover_to_a_pricier_sibling_tops_the_lease_hold_up() {
    tops_up(true).await;
}

#[tokio::test]
async fn a_failover_to_a_pricier_sibling_tops_the_database_hold_up() {
    tops_up(false).await;
}

#[tokio::test]
async fn when_the_balance_cannot_top_up_the_sibling_gets_what_the_hold_pays_for() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    // 3 credits: cheap's hold (the prompt and 1,000 tokens at 2 per 1K, ~2.02) fits, dear's
    // bound (~5.06) does not, and what is left cannot make up the difference.
    let opts = Opts {
        credits: Some(3.0),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &config(&a, &b), opts).await;
    a.set_mode(Mode::Status(500));
    let before = gw.balance(&gw.key).await;
    assert_eq!(before, 3_000_000);
    let body = json!({"model":"cheap","messages":user("hi")});
    let prompt = estimate(&body);
    let r = gw.chat(body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let held = prompt * 1_000 + 1_000 * 2_000;
    let lowered = (held - prompt * 3_000) / 5_000;
    let up = b.requests().last().unwrap().json();
    assert_eq!(up["max_tokens"], lowered, "{up}");
    let u = gw.usage(&gw.key).await;
    let row = &u["recent"][0];
    assert_eq!(
        row["hold_note"],
        format!("dear: max_tokens lowered to {lowered}"),
        "{row}"
    );
    assert_eq!(before - gw.balance(&gw.key).await, dear_cost(row));
}

#[tokio::test]
async fn a_sibling_the_hold_cannot_buy_one_token_of_is_skipped_and_the_row_says_so() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}",
        provider("p1", &[&a], ""),
        provider("p2", &[&b], ""),
        "[[models]]\nid = \"mini\"\nprovider = \"p1\"\ntier = \"economy\"\ninput_credits_per_1k = 0.15\noutput_credits_per_1k = 0.6\n\n",
        "[[models]]\nid = \"huge\"\nprovider = \"p2\"\ntier = \"economy\"\ninput_credits_per_1k = 1000000\noutput_credits_per_1k = 1000000\n\n",
    );
    let opts = Opts {
        credits: Some(100.0),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    a.set_mode(Mode::Status(500));
    let before = gw.balance(&gw.key).await;
    gw.chat(json!({"model":"mini","messages":user("hi")}))
        .await
        .error(502, "upstream_error");
    assert_eq!(b.chat_count(), 0);
    assert_eq!(gw.balance(&gw.key).await, before);
    let u = gw.usage(&gw.key).await;
    let row = &u["recent"][0];
    assert_eq!(row["credits"].as_f64(), Some(0.0), "{row}");
    assert_eq!(
        row["hold_note"], "huge: skipped, the hold cannot pay one token",
        "{row}"
    );
}
