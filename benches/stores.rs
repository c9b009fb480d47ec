//! What the stores add to a metered request: the credit ledger's hold and settlement (with its
//! usage row) on SQLite and, when `TOLLGATE_BENCH_DATABASE_URL` names one, on Postgres; an
//! uncached key lookup; and the rate limiter's check-and-count in-process and, when
//! `TOLLGATE_BENCH_REDIS_URL` names one, in Redis (one Lua script round trip).

use criterion::{criterion_group, criterion_main, Criterion};
use tollgate::ledger::{Ledger, Settlement};
use tollgate_filters::credits::size_hold;

/// The gateway's default acquire timeout (`storage.acquire_timeout_ms`).
const ACQUIRE: std::time::Duration = std::time::Duration::from_secs(2);

fn ledgers(rt: &tokio::runtime::Runtime) -> Vec<(String, Ledger)> {
    let dir = std::env::temp_dir().join(format!("tollgate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = vec![(
        "sqlite".to_string(),
        rt.block_on(Ledger::connect(
            &format!("sqlite://{}/bench.db", dir.display()),
            ACQUIRE,
        ))
        .unwrap(),
    )];
    if let Ok(url) = std::env::var("TOLLGATE_BENCH_DATABASE_URL") {
        out.push((
            "postgres".to_string(),
            rt.block_on(Ledger::connect(&url, ACQUIRE)).unwrap(),
        ));
    }
    out
}

fn bench_ledger(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (name, ledger) in ledgers(&rt) {
        let user = format!("usr_bench_{}_{name}", std::process::id());
        rt.block_on(ledger.create_account(&user, None, None, i64::MAX / 4, None, 0))
            .unwrap();
        let plan = size_hold(500, 256, 1, 1_000_000, 2_000_000);
        let mut n = 0u64;
        c.bench_function(&format!("ledger_hold_and_settle/{name}"), |b| {
            b.iter(|| {
                n += 1;
                let id = format!("req_bench_{}_{name}_{n}", std::process::id());
                rt.block_on(async {
                    ledger
                        .hold(&id, &user, &plan, i64::MAX)
                        .await
                        .unwrap()
                        .unwrap();
                    ledger
                        .settle(&Settlement {
                            hold_id: id.clone(),
                            request_id: id,
                            account_id: user.clone(),
                            key_id: None,
                            model_requested: "m".into(),
                            model_used: Some("m".into()),
                            provider: Some("p".into()),
                            prompt_tokens: 500,
                            completion_tokens: 200,
                            cost: 900_000,
                            status: 200,
                            latency_ms: 10,
                            now_ms: 0,
                            hold_note: None,
                            saving: Default::default(),
                            tool: None,
                        })
                        .await
                        .unwrap()
                })
            })
        });
        c.bench_function(&format!("ledger_key_lookup_uncached/{name}"), |b| {
            b.iter(|| {
                rt.block_on(
                    ledger.key_auth(
                        "0000000000000000000000000000000000000000000000000000000000000000",
                    ),
                )
                .unwrap()
            })
        });
    }
}

fn bench_limiter(c: &mut Criterion) {
    use tollgate::config::FailureMode;
    use tollgate::limits::Limiter;
    use tollgate_filters::ratelimit::{Window, DAY_MS, HOUR_MS};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let metrics = tollgate::metrics::Metrics::new();
    // Limits high enough never to refuse: the cost measured is check-and-count.
    let windows = [
        Window {
            window_ms: HOUR_MS,
            limit: u64::MAX / 2,
        },
        Window {
            window_ms: DAY_MS,
            limit: u64::MAX / 2,
        },
    ];
    let local = Limiter::new(
        None,
        FailureMode::FailOpen,
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(30),
    );
    let mut n = 0u64;
    c.bench_function("limiter_check/in_process", |b| {
        b.iter(|| {
            n += 1;
            // Spread over accounts like real traffic, so logs stay short.
            let ident = format!("acct:{}", n % 1000);
            rt.block_on(local.check(&ident, &windows, "m", "bench", &metrics))
                .unwrap()
        })
    });
    let Ok(url) = std::env::var("TOLLGATE_BENCH_REDIS_URL") else {
        return;
    };
    // Every request checked in Redis, then with reservations of 64 admissions (the bench id keeps its old `leased` name, for the history) (one account).
    for (name, lease, accounts) in [
        ("limiter_check/redis", 0, 1000),
        ("limiter_check/redis_leased_64", 64, 1),
    ] {
        let redis = Limiter::new(
            Some((format!("bench{}{lease}", std::process::id()), lease)),
            FailureMode::FailClosed,
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(30),
        );
        let conn = rt.block_on(async {
            redis::aio::ConnectionManager::new(redis::Client::open(url.as_str()).unwrap())
                .await
                .unwrap()
        });
        if let Some(counter) = &redis.redis {
            counter.connected(conn);
        }
        c.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let ident = format!("acct:{}", n % accounts);
                rt.block_on(redis.check(&ident, &windows, &n.to_string(), "bench", &metrics))
                    .unwrap()
            })
        });
    }
}

criterion_group!(benches, bench_ledger, bench_limiter);
criterion_main!(benches);
