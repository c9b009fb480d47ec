//! The ledger through a transaction-mode pooler: two instances that start (and migrate) through
//! Debian's PgBouncer with `pool_mode = transaction` and four server connections, 50 concurrent
//! chat requests over both, every one answered 200 and charged exactly, and no prepared
//! statement of one client ever met by another (issue 49).

use serde_json::json;
use tollgate_testkit::pgbouncer::PgBouncer;
use tollgate_testkit::*;

#[tokio::test]
async fn two_instances_charge_exactly_through_pgbouncer_in_transaction_mode() {
    let direct = match std::env::var("TOLLGATE_TEST_DATABASE_URL") {
        Ok(u) if u.starts_with("postgres") => u,
        _ => return skip("pgbouncer.rs needs Postgres (TOLLGATE_TEST_DATABASE_URL)"),
    };
    let bouncer = match PgBouncer::start(&direct) {
        Ok(b) => b,
        Err(why) => return skip(&format!("pgbouncer.rs: {why}")),
    };
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    // No credit leases: every request holds and settles in the ledger, so every request's
    // statements go through the pooler.
    let opts = Opts {
        database_url: Some(bouncer.url()),
        storage: "lease_holds = 0\npostgres_pooler = \"transaction\"".into(),
        ..Opts::default()
    };
    let one = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    let initial = books::read(&direct, &one.user_id).await.money;

    let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 20});
    let sends = (0..50).map(|i| {
        let gw = if i % 2 == 0 { &one } else { &two };
        let (key, body) = (one.key.clone(), body.clone());
        async move { gw.chat_as(Some(&key), &body).await }
    });
    let answers = futures_join_all(sends).await;
    let mut ok = Vec::new();
    for r in &answers {
        assert_eq!(
            r.status,
            200,
            "{}\n--- one:\n{}\n--- two:\n{}\n--- pgbouncer:\n{}",
            r.text(),
            one.log(),
            two.log(),
            bouncer.log()
        );
        ok.push(r.header("x-request-id").expect("a request id").to_owned());
    }
    books::check(&direct, &one.user_id, initial, &ok).await;
    for (who, log) in [
        ("one", one.log()),
        ("two", two.log()),
        ("pgbouncer", bouncer.log()),
    ] {
        assert!(
            !log.contains("prepared statement"),
            "{who}'s log speaks of prepared statements:\n{log}"
        );
    }
}

/// All the futures at once on this task (the test's requests are concurrent, not parallel:
/// the gateways and the pooler are other processes).
async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = futs.map(Box::pin).collect();
    let mut out = Vec::with_capacity(handles.len());
    let mut pending: Vec<_> = handles.into_iter().map(Some).collect();
    let mut results: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut left = 0;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        results[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => left += 1,
                }
            }
        }
        if left == 0 {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    out.extend(results.into_iter().flatten());
    out
}
