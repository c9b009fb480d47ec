//! Upgrades and restarts that lose no connection: ten rolling upgrades (`serve --upgrade`, the
//! same binary and config) and ten config-changing restarts, while two clients open new
//! connections back to back, two keep keep-alive connections busy and two keep streams
//! running: no connection reset, no request refused or left unanswered, every stream whole,
//! `/metrics` answering from each new process, and the books exact. Run on whichever backend
//! the test run has (SQLite, or Postgres + Redis).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_testkit::*;

/// What the clients saw.
#[derive(Default)]
struct Seen {
    /// Request ids of the answers 200 (each must have its usage row).
    ok: Vec<String>,
    /// Anything else: a reset, a refused connect, a request without an answer, a status not 200,
    /// a stream cut short.
    failures: Vec<String>,
    streams: usize,
    new_connections: usize,
    keepalive_requests: usize,
}

fn request(key: &str, stream: bool, close: bool) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"stream":{stream}}}"#
    );
    let conn = if close { "Connection: close\r\n" } else { "" };
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{conn}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One response off `s`: its status, request id, whether the server closes after it, and its
/// body (Content-Length, or read to the close).
async fn response(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<(u16, String, bool, Vec<u8>), String> {
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk).await {
            Ok(0) => return Err(format!("closed without an answer ({} bytes in)", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    buf.drain(..head_end);
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let id = field("x-request-id:").unwrap_or_default();
    let close = field("connection:").is_some_and(|v| v == "close");
    let body = match field("content-length:").and_then(|v| v.parse::<usize>().ok()) {
        Some(len) => {
            while buf.len() < len {
                let mut chunk = [0u8; 8192];
                match s.read(&mut chunk).await {
                    Ok(0) => return Err("body cut short".into()),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) => return Err(format!("reading the body: {e}")),
                }
            }
            buf.drain(..len).collect()
        }
        None => {
            let mut rest = std::mem::take(buf);
            s.read_to_end(&mut rest)
                .await
                .map_err(|e| format!("reading the stream: {e}"))?;
            rest
        }
    };
    Ok((status, id, close, body))
}

/// A client opening a new connection for every request.
async fn new_connections(
    addr: SocketAddr,
    key: String,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let outcome = async {
            let mut s = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            s.write_all(&request(&key, false, true))
                .await
                .map_err(|e| format!("send: {e}"))?;
            response(&mut s, &mut Vec::new()).await
        }
        .await;
        let mut seen = seen.lock().unwrap();
        seen.new_connections += 1;
        record(
            &mut seen,
            "new connection",
            outcome.map(|(st, id, _, _)| (st, id)),
        );
    }
}

/// A client keeping one connection for request after request, opening another only when the
/// server closes it (with `Connection: close`, as a stopping instance answers).
async fn keep_alive(addr: SocketAddr, key: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    let mut conn: Option<(TcpStream, Vec<u8>)> = None;
    while !stop.load(Ordering::Relaxed) {
        if conn.is_none() {
            match TcpStream::connect(addr).await {
                Ok(s) => conn = Some((s, Vec::new())),
                Err(e) => {
                    seen.lock()
                        .unwrap()
                        .failures
                        .push(format!("keep-alive connect: {e}"));
                    continue;
                }
            }
        }
        let Some((s, buf)) = conn.as_mut() else {
            continue;
        };
        let outcome = match s.write_all(&request(&key, false, false)).await {
            Ok(()) => response(s, buf).await,
            Err(e) => Err(format!("send: {e}")),
        };
        let closes = !matches!(outcome, Ok((_, _, false, _)));
        {
            let mut seen = seen.lock().unwrap();
            seen.keepalive_requests += 1;
            record(
                &mut seen,
                "keep-alive",
                outcome.map(|(st, id, _, _)| (st, id)),
            );
        }
        if closes {
            conn = None;
        }
    }
}

/// A client running one stream after another, each read to its end.
async fn streams(addr: SocketAddr, key: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    while !stop.load(Ordering::Relaxed) {
        let outcome = async {
            let mut s = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            s.write_all(&request(&key, true, true))
                .await
                .map_err(|e| format!("send: {e}"))?;
            let (status, id, _, body) = response(&mut s, &mut Vec::new()).await?;
            if status == 200 && !String::from_utf8_lossy(&body).contains("[DONE]") {
                return Err(format!("stream {id} cut short"));
            }
            Ok((status, id))
        }
        .await;
        let mut seen = seen.lock().unwrap();
        seen.streams += 1;
        record(&mut seen, "stream", outcome);
    }
}

fn record(seen: &mut Seen, what: &str, outcome: Result<(u16, String), String>) {
    match outcome {
        Ok((200, id)) => seen.ok.push(id),
        Ok((status, id)) => seen.failures.push(format!("{what}: {status} ({id})")),
        Err(e) => seen.failures.push(format!("{what}: {e}")),
    }
}

fn body(max_output_tokens: u32) -> String {
    format!(
        "[[providers]]\nname = \"p\"\nendpoints = [\"{{URL}}\"]\n\n{}",
        model("m", "p", "economy", "").replace(
            "max_output_tokens = 1000",
            &format!("max_output_tokens = {max_output_tokens}")
        )
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upgrades_and_restarts_under_load_lose_no_connection_and_no_request() {
    // Streams of 20 chunks 10 ms apart: each spans ~200 ms, so most handovers find some running.
    let fake = FakeOpenAi::builder("p")
        .words(20)
        .mode(Mode::Slow(Duration::from_millis(10)))
        .quiet()
        .start()
        .await;
    let config = |tokens| {
        format!(
            "{FAST_TIMEOUTS}{}",
            body(tokens).replace("{URL}", &fake.url())
        )
    };
    let opts = Opts {
        grace_secs: Some(2),
        ..Opts::default()
    };
    let mut gw = Gateway::start_opts(tollgate_bin!(), &config(1000), opts).await;
    let initial = books::read(&gw.config_db(), &gw.user_id).await.money;
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (addr, key) = (gw.addr, gw.key.clone());
        clients.push(tokio::spawn(new_connections(
            addr,
            key.clone(),
            stop.clone(),
            seen.clone(),
        )));
        clients.push(tokio::spawn(keep_alive(
            addr,
            key.clone(),
            stop.clone(),
            seen.clone(),
        )));
        clients.push(tokio::spawn(streams(addr, key, stop.clone(), seen.clone())));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut stopping = Vec::new();
    for round in 0..20 {
        // The first ten: the same binary and config; then ten restarts with a changed config.
        let changed = (round >= 10).then(|| config(1000 - round));
        let old = gw.upgrade(tollgate_bin!(), changed.as_deref()).await;
        stopping.push(old);
        let metrics = get(gw.metrics_addr, "/metrics").await;
        assert_eq!(
            metrics.status, 200,
            "round {round}: /metrics from the new process"
        );
        assert!(metrics.text().contains("tollgate_upstream_healthy"));
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    // Every old process stops by itself, cleanly, within its grace.
    let start = Instant::now();
    for mut old in stopping {
        loop {
            if let Some(status) = old.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "an old process exited with {status}: {}",
                    gw.log()
                );
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "an old process did not stop: {}",
                gw.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert!(
        seen.failures.is_empty(),
        "{} failures of {} requests (first: {:?})",
        seen.failures.len(),
        seen.ok.len() + seen.failures.len(),
        &seen.failures[..seen.failures.len().min(10)]
    );
    assert!(
        seen.new_connections >= 100,
        "new connections: {}",
        seen.new_connections
    );
    assert!(
        seen.keepalive_requests >= 100,
        "keep-alive requests: {}",
        seen.keepalive_requests
    );
    assert!(seen.streams >= 40, "streams: {}", seen.streams);
    assert_eq!(gw.log().matches("upgrade: accepting").count(), 20);
    assert!(gw.is_healthy().await);
    books::check(&gw.config_db(), &gw.user_id, initial, &seen.ok).await;
}

#[tokio::test]
async fn upgrade_with_no_instance_running_binds_and_a_busy_port_fails_the_start() {
    let fake = FakeOpenAi::start("p").await;
    let mut gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    // A second process on the same config without --upgrade cannot take the metrics port: a
    // start failure, named, not a thread that dies.
    let out = std::process::Command::new(tollgate_bin!())
        .args(["serve", "--config"])
        .arg(&gw.config_path)
        .env("TOLLGATE_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start") && err.contains("metrics_listen"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(gw.is_healthy().await, "the running instance serves on");

    // The instance stops; `--upgrade` then finds none and binds as a first start does.
    let _ = gw.child.kill();
    let _ = gw.child.wait();
    let mut old = gw.upgrade(tollgate_bin!(), None).await;
    let _ = old.wait();
    let r = gw
        .chat(serde_json::json!({"model":"m","messages":user("hi")}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        gw.log().contains("no instance to take over from"),
        "{}",
        gw.log()
    );
}
