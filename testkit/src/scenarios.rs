//! The streaming client of `benches/scenarios.sh` (`tollgate-bench sse`): streams run back to
//! back on each of `conns` keep-alive connections for `secs` (or one each when `secs` is 0),
//! and for each stream the time to the response's first byte, to its first content event (text
//! or a tool call's delta), to its last byte, and every gap between two content events as the
//! client saw them arrive (two events that came in one read are 0 apart: the client got them
//! at once). With `check_tools`, each stream's tool calls are reassembled from their argument
//! deltas, by `index`, and compared with what the fake sent ([`crate::scenarios_fake`]).
//! Prints one JSON line of percentiles (µs).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::scenarios_fake::{tool_arguments, tool_name, CALLS};

/// What `sse` runs: where, the request's bytes (head and body), how many at once, how long.
pub struct SseRun {
    pub host: String,
    pub request: Vec<u8>,
    pub conns: usize,
    pub secs: f64,
    pub check_tools: bool,
}

/// One stream's timings (µs from the request's write) and what its tool calls came to.
#[derive(Default)]
struct One {
    ttfb: u64,
    ttfc: Option<u64>,
    ttlb: u64,
    gaps: Vec<u64>,
    content_events: usize,
    /// Arguments and name by the call's `index`.
    calls: Vec<(String, String)>,
}

impl One {
    fn event(&mut self, data: &str, at: u64, last: &mut Option<u64>) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let delta = &v["choices"][0]["delta"];
        let text = delta["content"].as_str().is_some_and(|s| !s.is_empty());
        let calls = delta["tool_calls"].as_array();
        for c in calls.into_iter().flatten() {
            let i = c["index"].as_u64().unwrap_or(0) as usize;
            if i >= 64 {
                continue;
            }
            if self.calls.len() <= i {
                self.calls.resize(i + 1, (String::new(), String::new()));
            }
            if let Some(n) = c["function"]["name"].as_str() {
                self.calls[i].1.push_str(n);
            }
            if let Some(a) = c["function"]["arguments"].as_str() {
                self.calls[i].0.push_str(a);
            }
        }
        if text || calls.is_some_and(|c| !c.is_empty()) {
            self.content_events += 1;
            self.ttfc.get_or_insert(at);
            if let Some(l) = *last {
                self.gaps.push(at - l);
            }
            *last = Some(at);
        }
    }

    fn tools_match(&self) -> bool {
        self.calls.len() == CALLS
            && self
                .calls
                .iter()
                .enumerate()
                .all(|(i, (args, name))| *args == tool_arguments(i) && *name == tool_name(i))
    }
}

fn bad() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, "bad response")
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Reads more into `raw`; `false` at the end of the connection.
async fn fill(s: &mut TcpStream, raw: &mut Vec<u8>) -> std::io::Result<bool> {
    raw.reserve(16 * 1024);
    Ok(s.read_buf(raw).await? > 0)
}

/// Moves the complete chunks of a chunked body from `raw` to `body`; true once the last
/// (empty) chunk and its blank line have come.
fn dechunk(raw: &mut Vec<u8>, body: &mut Vec<u8>) -> std::io::Result<bool> {
    loop {
        let Some(eol) = find(raw, b"\r\n") else {
            return Ok(false);
        };
        let line = std::str::from_utf8(&raw[..eol]).map_err(|_| bad())?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad())?;
        if size == 0 {
            // No trailers from any of the targets: the blank line ends the body.
            if raw.len() < eol + 4 {
                return Ok(false);
            }
            raw.drain(..eol + 4);
            return Ok(true);
        }
        if raw.len() < eol + 2 + size + 2 {
            return Ok(false);
        }
        body.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw.drain(..eol + 2 + size + 2);
    }
}

/// Hands each complete SSE event in `body` to `one`, as arrived at `at`.
fn events(body: &mut Vec<u8>, one: &mut One, at: u64, last: &mut Option<u64>) {
    loop {
        let lf = find(body, b"\n\n").map(|p| (p, 2));
        let crlf = find(body, b"\r\n\r\n").map(|p| (p, 4));
        let Some((end, sep)) = [lf, crlf].into_iter().flatten().min() else {
            return;
        };
        let text = String::from_utf8_lossy(&body[..end]).into_owned();
        body.drain(..end + sep);
        for line in text.lines() {
            if let Some(d) = line.strip_prefix("data:") {
                let d = d.trim();
                if d != "[DONE]" {
                    one.event(d, at, last);
                }
            }
        }
    }
}

/// One stream on `s`; with whether the server closed the connection to end it.
async fn stream_once(
    s: &mut TcpStream,
    raw: &mut Vec<u8>,
    request: &[u8],
) -> std::io::Result<(One, bool)> {
    let began = Instant::now();
    let us = |t: Instant| t.duration_since(began).as_micros() as u64;
    s.write_all(request).await?;
    let mut one = One::default();
    let mut first = true;
    let head_end = loop {
        if let Some(p) = find(raw, b"\r\n\r\n") {
            break p + 4;
        }
        if !fill(s, raw).await? {
            return Err(bad());
        }
        if first {
            one.ttfb = us(Instant::now());
            first = false;
        }
    };
    if first {
        // The head was already read with the response before this one (never, one at a time).
        one.ttfb = us(Instant::now());
    }
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    raw.drain(..head_end);
    if head.split(' ').nth(1) != Some("200") {
        return Err(bad());
    }
    let chunked = head.contains("transfer-encoding: chunked");
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let mut body = Vec::new();
    let mut last = None;
    let mut closed = head.contains("connection: close");
    loop {
        let at = us(Instant::now());
        let done = if chunked {
            dechunk(raw, &mut body)?
        } else if let Some(len) = len {
            let n = len.saturating_sub(body.len()).min(raw.len());
            body.extend(raw.drain(..n));
            body.len() >= len
        } else {
            body.append(raw);
            false
        };
        events(&mut body, &mut one, at, &mut last);
        if done {
            break;
        }
        if !fill(s, raw).await? {
            if chunked || len.is_some() {
                return Err(bad());
            }
            // Delimited by the connection's end.
            let at = us(Instant::now());
            body.append(raw);
            body.extend_from_slice(b"\n\n");
            events(&mut body, &mut one, at, &mut last);
            closed = true;
            break;
        }
    }
    one.ttlb = us(Instant::now());
    Ok((one, closed))
}

fn pct(v: &mut [u64], p: f64) -> u64 {
    v.sort_unstable();
    if v.is_empty() {
        0
    } else {
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    }
}

/// Runs the streams and prints the JSON line.
pub async fn run_sse(run: SseRun) {
    let run = Arc::new(run);
    let done: Arc<Mutex<(Vec<One>, u64)>> = Arc::default();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(run.secs);
    let mut tasks = Vec::new();
    for _ in 0..run.conns.max(1) {
        let (run, done) = (run.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn: Option<TcpStream> = None;
            let mut raw = Vec::with_capacity(64 * 1024);
            let (mut ok, mut errors) = (Vec::new(), 0u64);
            loop {
                if conn.is_none() {
                    match TcpStream::connect(&run.host).await {
                        Ok(s) => {
                            let _ = s.set_nodelay(true);
                            conn = Some(s);
                            raw.clear();
                        }
                        Err(_) => {
                            errors += 1;
                            // Not a busy loop against a target that is down.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
                if let Some(s) = conn.as_mut() {
                    match stream_once(s, &mut raw, &run.request).await {
                        Ok((one, closed)) => {
                            if closed {
                                conn = None;
                            }
                            ok.push(one);
                        }
                        Err(_) => {
                            errors += 1;
                            conn = None;
                        }
                    }
                }
                if run.secs <= 0.0 || Instant::now() >= end {
                    break;
                }
            }
            if let Ok(mut d) = done.lock() {
                d.0.extend(ok);
                d.1 += errors;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let (all, errors) = match done.lock() {
        Ok(mut d) => (std::mem::take(&mut d.0), d.1),
        Err(_) => (Vec::new(), 0),
    };
    let mut ttfb: Vec<u64> = all.iter().map(|o| o.ttfb).collect();
    let mut ttfc: Vec<u64> = all.iter().filter_map(|o| o.ttfc).collect();
    let mut ttlb: Vec<u64> = all.iter().map(|o| o.ttlb).collect();
    let mut gaps: Vec<u64> = all.iter().flat_map(|o| o.gaps.iter().copied()).collect();
    let events: usize = all.iter().map(|o| o.content_events).sum();
    let tools_ok = all.iter().filter(|o| o.tools_match()).count();
    let tools = if run.check_tools {
        format!(
            ",\"tools_ok\":{tools_ok},\"tools_bad\":{}",
            all.len() - tools_ok
        )
    } else {
        String::new()
    };
    println!(
        "{{\"streams\":{},\"errors\":{errors},\"no_content\":{},\"ttfb_p50_us\":{},\"ttfb_p99_us\":{},\"ttfc_p50_us\":{},\"ttfc_p99_us\":{},\"ttlb_p50_us\":{},\"ttlb_p99_us\":{},\"gap_p50_us\":{},\"gap_p99_us\":{},\"gap_max_us\":{},\"events_per_stream\":{:.1}{tools}}}",
        all.len(),
        all.len() - ttfc.len(),
        pct(&mut ttfb, 0.5),
        pct(&mut ttfb, 0.99),
        pct(&mut ttfc, 0.5),
        pct(&mut ttfc, 0.99),
        pct(&mut ttlb, 0.5),
        pct(&mut ttlb, 0.99),
        pct(&mut gaps, 0.5),
        pct(&mut gaps, 0.99),
        gaps.last().copied().unwrap_or(0),
        events as f64 / all.len().max(1) as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_sse_is_reassembled_across_cuts() {
        let args = tool_arguments(0);
        let mut raw = Vec::new();
        for c in 0..CALLS {
            let a = tool_arguments(c);
            for (k, p) in crate::scenarios_fake::pieces(&a, 10).iter().enumerate() {
                let mut f = serde_json::json!({"index": c, "function": {"arguments": p}});
                if k == 0 {
                    f["function"]["name"] = tool_name(c).into();
                }
                let e = format!(
                    "data: {}\n\n",
                    serde_json::json!({"choices":[{"delta":{"tool_calls":[f]}}]})
                );
                raw.extend(format!("{:x}\r\n{e}\r\n", e.len()).into_bytes());
            }
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        let (mut body, mut one, mut last) = (Vec::new(), One::default(), None);
        // Fed a few bytes at a time, as reads may cut anywhere.
        let mut fed = Vec::new();
        let mut done = false;
        for b in raw.chunks(7) {
            fed.extend_from_slice(b);
            done = dechunk(&mut fed, &mut body).unwrap();
            events(&mut body, &mut one, 1, &mut last);
        }
        assert!(done);
        assert_eq!(one.calls[0].0, args);
        assert!(one.tools_match());
        assert_eq!(one.content_events, 20);
    }
}
