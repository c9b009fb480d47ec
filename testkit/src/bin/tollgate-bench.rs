//! `tollgate-bench`: the benchmarks' tools in one binary.
//!
//! - `tollgate-bench fake --listen ADDR [--words N] [--delay-ms D] [--die-after K] [--status S]`:
//!   the fake OpenAI-compatible provider of the tests (`tollgate_testkit::FakeOpenAi`), fast and
//!   quiet: JSON, or SSE with N chunks, D ms apart (each stream dropped after K chunks when
//!   asked; every request answered with status S and an error body when asked).
//! - `tollgate-bench deltas --listen ADDR [--pieces N] [--delay-ms D]`: a provider whose every
//!   answer is two parallel tool calls streamed as about N argument deltas each, D ms apart
//!   (`tollgate_testkit::scenarios_fake`); `closer --listen ADDR`: one that reads each request
//!   and closes the connection (benches/scenarios.sh).
//! - `tollgate-bench tools --listen ADDR`: a plain JSON-RPC tool server (the MCP rows).
//! - `tollgate-bench sink --listen ADDR`: an OTLP/HTTP trace sink answering every export 200,
//!   keeping nothing (the tracing rows).
//! - `tollgate-bench pingora --listen ADDR --upstream HOST:PORT [--threads N]`: Pingora's own
//!   proxy with no logic in front of one upstream: the floor for one hop on our framework.
//! - `tollgate-bench anthropic --listen ADDR`: the fake Messages API provider of the tests
//!   (`tollgate_testkit::FakeAnthropic`), keeping nothing of the requests.
//! - `tollgate-bench load --url URL --mode rate|max|streams ...`: an HTTP/1.1 keep-alive load
//!   generator printing one JSON line: p50/p99 latency (µs), requests/s, requests completed,
//!   errors. `rate` is open-loop at `--rps` for `--secs` (latency measured from each request's
//!   scheduled time, so a slow server cannot hide its queue); `max` is closed-loop on `--conns`
//!   connections; `streams` runs `--conns` streams at once and measures time to last byte.
//!   The chat request can be shaped: `--max-tokens N` (the fake then answers N words: N content
//!   chunks when streamed), `--pad-to BYTES` (the user message padded to that body size);
//!   `--keys-file FILE` (one API key a line) sends each request with the next key, round-robin;
//!   `--expect CODE` counts answers with that status as done (default 200), others as errors.
//! - `tollgate-bench sse --url URL --conns C --secs S [--check-tools] [load's request options]`:
//!   streams back to back on C connections for S seconds (one each with 0), printing the
//!   percentiles of time to first byte, to first content event and to last byte, and of the
//!   gaps between content events (`tollgate_testkit::scenarios`); `--check-tools` also checks
//!   that the tool calls reassembled from their deltas are the `deltas` fake's.
//! - `tollgate-bench body [--model M] [--stream] [--max-tokens N] [--pad-to BYTES]`: prints the
//!   body `load` would send, for another load generator (`LOADGEN=oha` in load.sh).

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tollgate_testkit::load::{chat_body, read_response};
use tollgate_testkit::{
    scenarios, scenarios_fake, FakeAnthropic, FakeOpenAi, FakeToolServer, Mode,
};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("pingora") {
        // Pingora runs its own runtimes.
        let listen = arg(&args, "--listen").unwrap_or_else(|| "127.0.0.1:9107".into());
        let upstream =
            arg(&args, "--upstream").unwrap_or_else(|| usage(Some("--upstream is required")));
        let threads = arg(&args, "--threads")
            .and_then(|t| t.parse().ok())
            .unwrap_or(2);
        tollgate_testkit::floor::run(&listen, &upstream, threads);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            arg(&args, "--threads")
                .and_then(|t| t.parse().ok())
                .unwrap_or(1),
        )
        .enable_all()
        .build()
        .expect("runtime");
    match args.get(1).map(String::as_str) {
        Some("fake") => rt.block_on(run_fake(&args)),
        Some("load") => rt.block_on(run_load(&args)),
        Some("tools") => rt.block_on(run_tools(&args)),
        Some("anthropic") => rt.block_on(run_anthropic(&args)),
        Some("deltas") => rt.block_on(run_deltas(&args)),
        Some("closer") => rt.block_on(async {
            let listen =
                arg(&args, "--listen").unwrap_or_else(|| usage(Some("--listen is required")));
            let addr = scenarios_fake::serve_closer(&listen).await;
            eprintln!("closing fake on {addr}");
            std::future::pending::<()>().await
        }),
        Some("sse") => {
            let t = target(&args);
            rt.block_on(scenarios::run_sse(scenarios::SseRun {
                host: t.host,
                request: t.requests.into_iter().next().unwrap_or_default(),
                conns: num(&args, "--conns", 8.0) as usize,
                secs: num(&args, "--secs", 0.0),
                check_tools: args.iter().any(|a| a == "--check-tools"),
            }))
        }
        Some("body") => print!("{}", body(&args)),
        Some("sink") => rt.block_on(async {
            let listen =
                arg(&args, "--listen").unwrap_or_else(|| usage(Some("--listen is required")));
            let addr = tollgate_testkit::collector::serve_sink(&listen).await;
            eprintln!("trace sink on {addr}");
            std::future::pending::<()>().await
        }),
        _ => usage(None),
    }
}

/// A number option, or its default.
fn num(args: &[String], name: &str, default: f64) -> f64 {
    arg(args, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Prints what went wrong and how to call the tool, and exits with status 2.
fn usage(problem: Option<&str>) -> ! {
    if let Some(p) = problem {
        eprintln!("tollgate-bench: {p}");
    }
    eprintln!("usage: tollgate-bench fake --listen ADDR [--words N] [--delay-ms D] [--die-after K] [--status S] | deltas --listen ADDR [--pieces N] [--delay-ms D] | closer --listen ADDR | sse --url URL [--conns C] [--secs S] [--check-tools] [load's request options] | tools --listen ADDR | anthropic --listen ADDR | pingora --listen ADDR --upstream HOST:PORT [--threads N] | load --url URL --mode rate|max|streams [--rps N] [--secs S] [--conns C] [--stream] [--header 'K: V'] [--body JSON | --model M --max-tokens N --pad-to BYTES] [--keys-file FILE] [--expect CODE] | body [--model M] [--stream] [--max-tokens N] [--pad-to BYTES]");
    std::process::exit(2);
}

/// A plain JSON-RPC tool server (no sessions) on `--listen`, for the tools/call rows.
async fn run_tools(args: &[String]) {
    let listen = arg(args, "--listen").unwrap_or_else(|| "127.0.0.1:9104".into());
    let f = FakeToolServer::plain_on(&listen).await;
    eprintln!("fake tool server on {}", f.addr);
    std::future::pending::<()>().await;
}

/// A fake Messages API provider on `--listen`, for the Anthropic-kind rows.
async fn run_anthropic(args: &[String]) {
    let listen = arg(args, "--listen").unwrap_or_else(|| "127.0.0.1:9105".into());
    let f = FakeAnthropic::start_on("bench", &listen, false).await;
    eprintln!("fake Messages API on {}", f.addr);
    std::future::pending::<()>().await;
}

async fn run_fake(args: &[String]) {
    let listen = arg(args, "--listen").unwrap_or_else(|| "127.0.0.1:9100".into());
    let words = arg(args, "--words")
        .and_then(|w| w.parse().ok())
        .unwrap_or(50);
    let mut fake = FakeOpenAi::builder("bench")
        .listen(&listen)
        .words(words)
        .quiet();
    if let Some(d) = arg(args, "--delay-ms")
        .and_then(|d| d.parse::<u64>().ok())
        .filter(|d| *d > 0)
    {
        fake = fake.mode(Mode::Slow(Duration::from_millis(d)));
    }
    // Every stream dropped after this many chunks (load.sh's resumed-streams row).
    if let Some(n) = arg(args, "--die-after").and_then(|n| n.parse().ok()) {
        let d = arg(args, "--delay-ms")
            .and_then(|d| d.parse().ok())
            .unwrap_or(0);
        fake = fake.mode(Mode::SlowThenDie(Duration::from_millis(d), n));
    }
    // Every request answered with this status (the failover rows' broken provider).
    if let Some(code) = arg(args, "--status").and_then(|c| c.parse().ok()) {
        fake = fake.mode(Mode::Status(code));
    }
    let f = fake.start().await;
    eprintln!("fake provider on {}", f.addr);
    std::future::pending::<()>().await;
}

/// The tool-call deltas fake on `--listen` (benches/scenarios.sh).
async fn run_deltas(args: &[String]) {
    let listen = arg(args, "--listen").unwrap_or_else(|| usage(Some("--listen is required")));
    let delay = Duration::from_millis(num(args, "--delay-ms", 0.0) as u64);
    let addr =
        scenarios_fake::serve_deltas(&listen, num(args, "--pieces", 64.0) as usize, delay).await;
    eprintln!("tool-call deltas fake on {addr}");
    std::future::pending::<()>().await;
}

struct Target {
    host: String,
    path: String,
    /// Whole requests, head and body, each sent with one write: one, or one per key.
    requests: Vec<Vec<u8>>,
    /// The status that counts as done.
    expect: u16,
}

/// `--body JSON`, or the chat request shaped by `--model`, `--stream`, `--max-tokens` and
/// `--pad-to` (a tools/call replaces it for the MCP rows).
fn body(args: &[String]) -> String {
    arg(args, "--body").unwrap_or_else(|| {
        chat_body(
            &arg(args, "--model").unwrap_or_else(|| "bench".into()),
            args.iter().any(|a| a == "--stream"),
            arg(args, "--max-tokens").and_then(|n| n.parse().ok()),
            arg(args, "--pad-to")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        )
    })
}

fn target(args: &[String]) -> Target {
    let url = arg(args, "--url").unwrap_or_else(|| usage(Some("--url is required")));
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| usage(Some("--url must start with http://")));
    let (host, path) = match rest.find('/') {
        Some(i) => (rest[..i].to_string(), rest[i..].to_string()),
        None => (rest.to_string(), "/".to_string()),
    };
    let body = body(args);
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    for (i, a) in args.iter().enumerate() {
        if a == "--header" {
            if let Some(h) = args.get(i + 1) {
                head.push_str(h);
                head.push_str("\r\n");
            }
        }
    }
    // Built up front, one per key: the loop then only picks one (keys × body bytes of memory,
    // small for the accounts rows, which send the bare chat request).
    let keys: Vec<String> = match arg(args, "--keys-file") {
        Some(f) => std::fs::read_to_string(&f)
            .unwrap_or_else(|e| usage(Some(&format!("--keys-file {f}: {e}"))))
            .lines()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(|k| format!("Authorization: Bearer {k}\r\n"))
            .collect(),
        None => vec![String::new()],
    };
    if keys.is_empty() {
        usage(Some("--keys-file has no keys"));
    }
    let requests = keys
        .iter()
        .map(|k| format!("{head}{k}\r\n{body}").into_bytes())
        .collect();
    Target {
        host,
        path,
        requests,
        expect: num(args, "--expect", 200.0) as u16,
    }
}

#[derive(Default)]
struct Stats {
    latencies: Mutex<Vec<u64>>,
    errors: AtomicU64,
}

async fn one(conn: &mut Option<TcpStream>, buf: &mut Vec<u8>, t: &Target, request: &[u8]) -> bool {
    for _ in 0..2 {
        if conn.is_none() {
            match TcpStream::connect(&t.host).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    *conn = Some(s);
                    buf.clear();
                }
                Err(_) => return false,
            }
        }
        let Some(s) = conn.as_mut() else { return false };
        if s.write_all(request).await.is_ok() {
            if let Ok(status) = read_response(s, buf).await {
                return status == t.expect;
            }
        }
        *conn = None;
    }
    false
}

async fn run_load(args: &[String]) {
    let t = Arc::new(target(args));
    let mode = arg(args, "--mode").unwrap_or_else(|| "max".into());
    let conns: usize = arg(args, "--conns")
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    let secs: f64 = arg(args, "--secs")
        .and_then(|c| c.parse().ok())
        .unwrap_or(10.0);
    let rps: f64 = arg(args, "--rps")
        .and_then(|c| c.parse().ok())
        .unwrap_or(1000.0);
    let stats = Arc::new(Stats::default());
    let launched = Instant::now();
    let start = launched + Duration::from_millis(50);
    let end = start + Duration::from_secs_f64(secs);
    let next = Arc::new(AtomicUsize::new(0));
    // Which key the next request uses, shared by all connections: a strict round-robin.
    let turn = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (t, stats, next, turn, mode) = (
            t.clone(),
            stats.clone(),
            next.clone(),
            turn.clone(),
            mode.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn: Option<TcpStream> = None;
            let mut buf = Vec::with_capacity(64 * 1024);
            let mut local = Vec::new();
            loop {
                let began = match mode.as_str() {
                    "rate" => {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let at = start + Duration::from_secs_f64(i as f64 / rps);
                        if at >= end {
                            break;
                        }
                        tokio::time::sleep_until(at.into()).await;
                        // Timers wake up to a millisecond late; count from the wake-up unless
                        // the schedule has slipped further (then the queueing counts too).
                        let now = Instant::now();
                        if now > at + Duration::from_millis(2) {
                            at
                        } else {
                            now
                        }
                    }
                    "streams" => {
                        // One stream per connection, all at once.
                        if next.fetch_add(1, Ordering::Relaxed) >= conns {
                            break;
                        }
                        Instant::now()
                    }
                    _ => {
                        let now = Instant::now();
                        if now >= end {
                            break;
                        }
                        now
                    }
                };
                let request = match t.requests.len() {
                    1 => &t.requests[0],
                    n => &t.requests[turn.fetch_add(1, Ordering::Relaxed) % n],
                };
                if one(&mut conn, &mut buf, &t, request).await {
                    local.push(began.elapsed().as_micros() as u64);
                } else {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                }
                if mode == "streams" {
                    break;
                }
            }
            if let Ok(mut l) = stats.latencies.lock() {
                l.extend(local);
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let elapsed = if mode == "streams" {
        // The streams start at once, not at `start`: ones answered within its 50 ms (a response
        // cache's replays) would otherwise have taken no time, and their rate no number.
        launched.elapsed()
    } else {
        Duration::from_secs_f64(secs)
    };
    let mut l = stats
        .latencies
        .lock()
        .map(|l| l.clone())
        .unwrap_or_default();
    l.sort_unstable();
    // Every request that ended, well or not: what the proxy's CPU time is divided by.
    let errors = stats.errors.load(Ordering::Relaxed);
    let pct = |p: f64| {
        if l.is_empty() {
            0
        } else {
            l[((l.len() as f64 - 1.0) * p).round() as usize]
        }
    };
    println!(
        "{{\"mode\":\"{mode}\",\"path\":\"{}\",\"ok\":{},\"errors\":{},\"requests\":{},\"rps\":{:.1},\"p50_us\":{},\"p99_us\":{},\"max_us\":{}}}",
        t.path,
        l.len(),
        errors,
        l.len() as u64 + errors,
        l.len() as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99),
        l.last().copied().unwrap_or(0)
    );
}
