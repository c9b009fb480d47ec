//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned by
//! `./dev test` under `.tools/`) run against the reference server
//! (`python/everything_server.py`, the `mcp` 2.x SDK) directly and through the gateway:
//! [`ReferenceServer`], [`AuthForwarder`] (the suite sends no `Authorization` header, so a
//! small forwarder adds the key) and [`run_suite`], which runs one suite version on one
//! requirement set and reads which scored scenarios passed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::gateway::free_port;

/// The suites' versions, pinned in `./dev` (`need_conformance`).
pub const SUITE_0_1: &str = "0.1.16";
pub const SUITE_0_2: &str = "0.2.0-alpha.12";

/// The files a run needs: a Node.js the suites run on (they need 22 or later: `fs.globSync`)
/// and each suite's entry point.
pub struct Tools {
    pub node: String,
    pub suite_0_1: String,
    pub suite_0_2: String,
}

/// `TOLLGATE_TEST_CONFORMANCE_NODE` / `_0_1` / `_0_2`, else what `./dev test` installs under
/// `.tools/`; `Err(why)` when one is missing or the Node.js is too old.
pub fn tools() -> Result<Tools, String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../.tools");
    let entry = "node_modules/@modelcontextprotocol/conformance/dist/index.js";
    let pick = |var: &str, local: String| std::env::var(var).unwrap_or(local);
    let t = Tools {
        node: pick(
            "TOLLGATE_TEST_CONFORMANCE_NODE",
            format!("{root}/node22/node_modules/.bin/node"),
        ),
        suite_0_1: pick(
            "TOLLGATE_TEST_CONFORMANCE_0_1",
            format!("{root}/conformance-0.1.16/{entry}"),
        ),
        suite_0_2: pick(
            "TOLLGATE_TEST_CONFORMANCE_0_2",
            format!("{root}/conformance-0.2/{entry}"),
        ),
    };
    let version = Command::new(&t.node)
        .arg("--version")
        .output()
        .map_err(|e| format!("no Node.js at {}: {e}", t.node))?;
    let major: u32 = String::from_utf8_lossy(&version.stdout)
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 22 {
        return Err(format!("{} is not Node.js 22 or later", t.node));
    }
    for (suite, want) in [(&t.suite_0_1, SUITE_0_1), (&t.suite_0_2, SUITE_0_2)] {
        let out = Command::new(&t.node)
            .args([suite.as_str(), "--version"])
            .output()
            .map_err(|e| format!("{suite}: {e}"))?;
        let got = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if got != want {
            return Err(format!(
                "{suite}: conformance suite {got:?}, expected {want}"
            ));
        }
    }
    Ok(t)
}

/// `python/everything_server.py` on a free port; the process dies with the value.
pub struct ReferenceServer {
    child: Child,
    pub port: u16,
}

impl ReferenceServer {
    /// Starts it with `python` (the `mcp` 2.x SDK) and waits until it accepts connections.
    pub async fn start(python: &str) -> ReferenceServer {
        let port = free_port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/everything_server.py");
        let child = Command::new(python)
            .args([script, &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the reference server");
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the reference server did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ReferenceServer { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for ReferenceServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A forwarder that adds one header to every request and passes everything else through as
/// it is, `Host` and `Origin` included (the DNS-rebinding scenario sends a foreign `Host`),
/// streaming the answers (SSE) as they come. One request per connection: it asks both sides
/// for `Connection: close`, so it never has to frame a message.
pub struct AuthForwarder {
    listener: Option<TcpListener>,
    pub port: u16,
}

impl AuthForwarder {
    /// Binds a port first, so the gateway's `allowed_hosts` can name it before it starts.
    pub async fn bind() -> AuthForwarder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        AuthForwarder {
            listener: Some(listener),
            port,
        }
    }

    /// Forwards to `target` from now on, adding `header` (e.g. `Authorization: Bearer …`).
    pub fn serve(&mut self, target: SocketAddr, header: String) {
        let listener = self.listener.take().expect("serve once");
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let header = header.clone();
                tokio::spawn(async move {
                    let _ = forward(client, target, &header).await;
                });
            }
        });
    }
}

async fn forward(mut client: TcpStream, target: SocketAddr, header: &str) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut client).await?;
    let mut upstream = TcpStream::connect(target).await?;
    upstream
        .write_all(&with_header(
            &head,
            &format!("{header}\r\nConnection: close"),
        ))
        .await?;
    upstream.write_all(&rest).await?;
    let (head, rest) = read_head(&mut upstream).await?;
    client
        .write_all(&with_header(&head, "Connection: close"))
        .await?;
    client.write_all(&rest).await?;
    // The rest of the request body one way, the answer (or a long event stream) the other,
    // until either side closes.
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Reads up to the blank line ending an HTTP head: (the head without it, what came after).
async fn read_head(s: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            return Ok((head, buf[end + 4..].to_vec()));
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `head` without its `Connection`/`Keep-Alive` lines, with `extra` lines added, and the blank
/// line that ends it.
fn with_header(head: &str, extra: &str) -> Vec<u8> {
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if i > 0 && (name == "connection" || name == "keep-alive") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str(extra);
    out.push_str("\r\n\r\n");
    out.into_bytes()
}

/// One run of a suite: each scored scenario's name and whether it passed, the suite's whole
/// output, and the folder of its per-scenario `checks.json` files.
pub struct Run {
    pub scenarios: BTreeMap<String, bool>,
    pub output: String,
    pub dir: PathBuf,
}

impl Run {
    pub fn passed(&self) -> Vec<&str> {
        self.names(true)
    }

    pub fn failed(&self) -> Vec<&str> {
        self.names(false)
    }

    /// The failed checks of `scenario`, `(id, message)` each, from its `checks.json`.
    pub fn why(&self, scenario: &str) -> Vec<(String, String)> {
        let prefix = format!("server-{scenario}-");
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return vec![];
        };
        let mut out = vec![];
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // `server-<scenario>-<timestamp>`: the timestamp starts with a digit, so a
            // scenario whose name extends another's is not taken for it.
            let Some(ts) = name.strip_prefix(&prefix) else {
                continue;
            };
            if !ts.starts_with(|c: char| c.is_ascii_digit()) {
                continue;
            }
            let text = std::fs::read_to_string(e.path().join("checks.json")).unwrap_or_default();
            let checks: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            for c in checks.as_array().into_iter().flatten() {
                if c["status"] == "FAILURE" {
                    let id = c["id"].as_str().unwrap_or_default().to_string();
                    out.push((
                        id,
                        c["errorMessage"].as_str().unwrap_or_default().to_string(),
                    ));
                }
            }
        }
        out
    }

    fn names(&self, passed: bool) -> Vec<&str> {
        self.scenarios
            .iter()
            .filter(|(_, p)| **p == passed)
            .map(|(n, _)| n.as_str())
            .collect()
    }
}

/// Runs `suite` (an entry point of [`Tools`]) with `node` against `url`: on `requirements`
/// (`--requirements`, the 0.2 line) or every server scenario (0.1.16), its `checks.json`
/// files under `dir`. Blocking.
pub fn run_suite(
    node: &str,
    suite: &str,
    url: &str,
    requirements: Option<&str>,
    dir: &Path,
) -> Run {
    let mut cmd = Command::new(node);
    cmd.args([suite, "server", "--url", url, "--output-dir"]);
    cmd.arg(dir);
    match requirements {
        // A scenario waiting on something that never comes (a relayed request) fails after
        // 20 s instead of the default 30 s.
        Some(r) => cmd.args(["--requirements", r, "--timeout", "20000"]),
        // 0.1.16 has no requirement sets: all its server scenarios, the two it calls pending
        // (JSON Schema 2020-12 in `tools/list`, SSE polling) with the rest.
        None => cmd.args(["--suite", "all"]),
    };
    let out = cmd.output().expect("run the conformance suite");
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Run {
        scenarios: parse_summary(&output),
        output,
        dir: dir.to_path_buf(),
    }
}

/// The suite's closing summary: a line `✓ name: N passed, M failed` (or `✗`) per scenario run,
/// then, on the 0.2 line, a `Not scored for …` list of those outside the requirement set
/// (extensions, pending ones), indented `  ✗ name (why)`: those are left out.
pub fn parse_summary(output: &str) -> BTreeMap<String, bool> {
    let mut all = BTreeMap::new();
    let mut unscored = Vec::new();
    let mut in_unscored = false;
    for line in output.lines() {
        if line.starts_with("Not scored") {
            in_unscored = true;
            continue;
        }
        let (mark, rest) = match line.trim_start().chars().next() {
            Some(c @ ('✓' | '✗')) => (c, line.trim_start()[c.len_utf8()..].trim()),
            _ => continue,
        };
        if in_unscored && line.starts_with("  ") {
            unscored.push(rest.split(' ').next().unwrap_or_default().to_string());
        } else if !line.starts_with(' ') {
            if let Some((name, counts)) = rest.split_once(": ") {
                if counts.contains(" passed, ") {
                    all.insert(name.to_string(), mark == '✓');
                }
            }
        }
    }
    for name in unscored {
        all.remove(&name);
    }
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_summary_keeps_scored_scenarios_only() {
        let out = "✓ ping: 2 passed, 0 failed\n  ✓ inner-check\n✗ tools-call-sampling: 1 passed, 1 failed\n✗ tasks-lifecycle: 2 passed, 7 failed\n\nTotal: 5 passed, 8 failed\n\nNot scored for 2026-07-28: 1 scenario(s) run, 1 failing.\n  ✗ tasks-lifecycle (extension)\n";
        let s = super::parse_summary(out);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s["ping"]);
        assert!(!s["tools-call-sampling"]);
    }
}
