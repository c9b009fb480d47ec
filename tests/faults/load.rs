//! Steady load for the fault tests: a few clients sending chat requests back to back while a
//! test breaks a store, each answer recorded with when it came and how long it took.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate_testkit::*;

/// A request slower than this counts as hung.
pub const HUNG: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct Outcome {
    /// When the request was sent, from the start of the load.
    pub sent: Duration,
    pub took: Duration,
    /// 0: no answer within [`HUNG`].
    pub status: u16,
    pub request_id: Option<String>,
    pub retry_after: Option<String>,
    pub body: String,
}

pub struct Load {
    stop: Arc<AtomicBool>,
    pub started: Instant,
    tasks: Vec<tokio::task::JoinHandle<Vec<Outcome>>>,
}

pub fn body() -> serde_json::Value {
    serde_json::json!({"model": "m", "messages": user("hi"), "max_tokens": 20})
}

impl Load {
    /// `clients` loops sending `body()` with `key` to `addr`, each pausing `pause` between
    /// requests.
    pub fn start(addr: SocketAddr, key: &str, clients: usize, pause: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let tasks = (0..clients)
            .map(|_| {
                let (stop, key) = (stop.clone(), key.to_string());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        out.push(one(addr, &key, started).await);
                        tokio::time::sleep(pause).await;
                    }
                    out
                })
            })
            .collect();
        Load {
            stop,
            started,
            tasks,
        }
    }

    /// An open loop: one request with `key` every `every`, each on its own (a slow answer
    /// never holds the next one back), as clients that do not wait for each other send them.
    pub fn open(addr: SocketAddr, key: &str, every: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let (flag, key) = (stop.clone(), key.to_string());
        let task = tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut tick = tokio::time::interval(every);
            while !flag.load(Ordering::SeqCst) {
                tick.tick().await;
                let key = key.clone();
                sent.push(tokio::spawn(async move { one(addr, &key, started).await }));
            }
            let mut out = Vec::new();
            for s in sent {
                out.push(s.await.unwrap());
            }
            out
        });
        Load {
            stop,
            started,
            tasks: vec![task],
        }
    }

    pub async fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await.unwrap());
        }
        all.sort_by_key(|o| o.sent);
        all
    }
}

pub async fn one(addr: SocketAddr, key: &str, started: Instant) -> Outcome {
    let b = serde_json::to_vec(&body()).unwrap();
    let auth = format!("Bearer {key}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    let sent = started.elapsed();
    let t = Instant::now();
    let r = tokio::time::timeout(
        HUNG,
        request(addr, "POST", "/v1/chat/completions", &headers, &b),
    )
    .await;
    let took = t.elapsed();
    match r {
        Ok(r) => Outcome {
            sent,
            took,
            status: r.status,
            request_id: r.header("x-request-id").map(str::to_string),
            retry_after: r.header("retry-after").map(str::to_string),
            body: r.text(),
        },
        Err(_) => Outcome {
            sent,
            took,
            status: 0,
            request_id: None,
            retry_after: None,
            body: String::new(),
        },
    }
}

/// Request ids of the answers 200.
pub fn ok_ids(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .filter(|o| o.status == 200)
        .filter_map(|o| o.request_id.clone())
        .collect()
}

/// Every 503 is `service_unavailable` with `Retry-After`, and was answered before any upstream
/// call: the provider saw exactly one request per 200.
pub fn check_refusals(outcomes: &[&Outcome], upstream_calls: usize) {
    for o in outcomes.iter().filter(|o| o.status == 503) {
        assert!(o.body.contains("\"service_unavailable\""), "{}", o.body);
        assert!(
            o.retry_after.is_some(),
            "503 without Retry-After: {}",
            o.body
        );
    }
    let served = outcomes.iter().filter(|o| o.status == 200).count();
    assert_eq!(
        upstream_calls, served,
        "an upstream call for a request refused with 503"
    );
}

/// A line per status with its count, for failure messages.
pub fn summary(outcomes: &[Outcome]) -> String {
    let mut by: std::collections::BTreeMap<u16, usize> = Default::default();
    for o in outcomes {
        *by.entry(o.status).or_default() += 1;
    }
    format!("{by:?}")
}

/// The log's lines above INFO (the last 60), for failure messages.
pub fn problems(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.contains(" INFO ")).collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
