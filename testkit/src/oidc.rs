//! A real OpenID provider for the single sign-on tests: the npm package `oidc-provider` (9.x, a
//! certified implementation; `./dev test` installs the pinned version under `.tools/oidc`) run
//! by Node.js from `oidc/provider.mjs`, on `127.0.0.1` over plain http.
//!
//! One client (code flow, `client_secret_basic`, PKCE S256 required, the one exact redirect
//! URI); any login is an account whose `sub` and `email` are the login, `email_verified: true`;
//! consent is automatic, so a browser goes login -> redirect (`python/sso_login.py`). Each start
//! makes a new RS256 signing key with a random `kid`: [`OidcProvider::rotate_key`] restarts the
//! provider on the same port, which rotates the key (and forgets every session, code and token:
//! its storage is in memory). [`OidcProvider::tamper`] makes it answer tampered ID tokens (a
//! changed claim under the original signature, a wrong `aud`/`iss`/`nonce`, expired, `alg:
//! none`, a stranger's key under its `kid`, an unverified e-mail), for the refusals end to end.
//!
//! Needs `TOLLGATE_TEST_OIDC_PROVIDER` (the directory holding `node_modules/oidc-provider`, else
//! the repository's `.tools/oidc`) and a Node.js: `TOLLGATE_TEST_CONFORMANCE_NODE`, else
//! `.tools/node22` (oidc-provider 9 supports Node.js 22 LTS and later), else `node` on the PATH
//! (20.19 or later). Without them [`OidcProvider::start`] reports the test as skipped
//! ([`crate::skip`]: a failure under `TOLLGATE_TEST_REQUIRE_SERVICES=1`) and returns `None`.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::gateway::free_port;
use crate::http::request;
use crate::services::skip;

/// The oidc-provider major version the script is written for.
const MAJOR: &str = "9.";
/// How long a start may take before it is a failure.
const START_TIMEOUT: Duration = Duration::from_secs(20);

pub struct OidcProvider {
    child: Child,
    port: u16,
    issuer: String,
    node: String,
    node_path: String,
    client: [String; 3],
    log: Arc<Mutex<String>>,
}

impl OidcProvider {
    /// Starts the provider on a free port with one client (`client_id`, `client_secret`, the
    /// exact `redirect_uri`) and waits until it listens. `None` (after [`crate::skip`]) when
    /// oidc-provider or a Node.js is missing; panics, with the provider's stderr, when it does
    /// not start.
    pub fn start(redirect_uri: &str, client_id: &str, client_secret: &str) -> Option<OidcProvider> {
        let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let dir = std::env::var("TOLLGATE_TEST_OIDC_PROVIDER")
            .ok()
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| format!("{repo}/.tools/oidc"));
        let manifest = format!("{dir}/node_modules/oidc-provider/package.json");
        let version = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["version"].as_str().map(str::to_string));
        match version {
            None => {
                skip(&format!(
                    "no oidc-provider at {manifest} (TOLLGATE_TEST_OIDC_PROVIDER); run ./dev test to install it"
                ));
                return None;
            }
            Some(v) if !v.starts_with(MAJOR) => {
                skip(&format!("{manifest}: oidc-provider {v}, expected {MAJOR}x"));
                return None;
            }
            Some(_) => {}
        }
        let Some(node) = node() else {
            skip("no Node.js 20.19 or later (TOLLGATE_TEST_CONFORMANCE_NODE, .tools/node22, node)");
            return None;
        };
        let port = free_port();
        let log = Arc::new(Mutex::new(String::new()));
        let node_path = format!("{dir}/node_modules");
        let client = [
            client_id.to_string(),
            client_secret.to_string(),
            redirect_uri.to_string(),
        ];
        let child = spawn(&node, &node_path, port, &client, &log);
        Some(OidcProvider {
            child,
            port,
            issuer: format!("http://127.0.0.1:{port}"),
            node,
            node_path,
            client,
            log,
        })
    }

    /// `http://127.0.0.1:{port}`, without a trailing slash (the discovery document is at
    /// `{issuer}/.well-known/openid-configuration`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the provider and starts it again on the same port: a new signing key (new `kid`),
    /// and every session, authorization code and token of the old process forgotten.
    pub fn rotate_key(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log
            .lock()
            .unwrap()
            .push_str("--- restarted: new key ---\n");
        self.child = spawn(
            &self.node,
            &self.node_path,
            self.port,
            &self.client,
            &self.log,
        );
    }

    /// Fault injection: from now on, the `id_token` of every successful token response is
    /// rewritten by `mode` (`None` stops it), until the next call; [`OidcProvider::rotate_key`]
    /// forgets it (the process restarts). The modes, each wrong in exactly one way:
    ///
    /// - `"signature"`: `email` changed in the payload, the original header and signature kept;
    /// - `"audience"`: `aud` = `"someone-else"`, re-signed with the provider's own key;
    /// - `"issuer"`: `iss` = `"http://127.0.0.1:9"`, re-signed;
    /// - `"expired"`: `exp` an hour ago, `iat` two hours ago, re-signed;
    /// - `"nonce"`: `nonce` = `"not-the-one-sent"`, re-signed;
    /// - `"alg_none"`: header `{"alg":"none"}`, empty signature part;
    /// - `"other_key"`: signed RS256 by a freshly generated key under the provider's `kid`;
    /// - `"unverified_email"`: `email_verified` = `false`, re-signed.
    ///
    /// Panics unless the provider answers 204 (an unknown mode is a 400).
    pub async fn tamper(&self, mode: Option<&str>) {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let body = serde_json::to_vec(&serde_json::json!({ "mode": mode })).unwrap();
        let r = request(
            addr,
            "POST",
            "/__tamper",
            &[("Content-Type", "application/json")],
            &body,
        )
        .await;
        assert_eq!(
            r.status,
            204,
            "POST {}/__tamper {mode:?}: {}\n{}",
            self.issuer,
            r.text(),
            self.log()
        );
    }

    /// Everything the provider wrote to stderr so far (its warnings and the errors it answered:
    /// `grant.error: …`, `authorization.error: …`), for an assertion's message.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `TOLLGATE_TEST_CONFORMANCE_NODE`, then `.tools/node22`, then `node`: the first Node.js 20.19
/// or later (oidc-provider 9 supports 22 LTS and later; 20 runs it with a warning).
fn node() -> Option<String> {
    let local = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../.tools/node22/node_modules/.bin/node"
    );
    [
        std::env::var("TOLLGATE_TEST_CONFORMANCE_NODE").ok(),
        Some(local.to_string()),
        Some("node".to_string()),
    ]
    .into_iter()
    .flatten()
    .find(|node| {
        let Ok(out) = Command::new(node).arg("--version").output() else {
            return false;
        };
        let v = String::from_utf8_lossy(&out.stdout);
        let mut parts = v.trim().trim_start_matches('v').split('.');
        let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        out.status.success() && (major > 20 || (major == 20 && minor >= 19))
    })
}

/// Runs `oidc/provider.mjs` and waits for its `READY` line; stderr goes to `log`.
fn spawn(
    node: &str,
    node_path: &str,
    port: u16,
    [client_id, client_secret, redirect_uri]: &[String; 3],
    log: &Arc<Mutex<String>>,
) -> Child {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/oidc/provider.mjs");
    let mut child = Command::new(node)
        .arg(script)
        .env("NODE_PATH", node_path)
        .env("PORT", port.to_string())
        .env("CLIENT_ID", client_id)
        .env("CLIENT_SECRET", client_secret)
        .env("REDIRECT_URI", redirect_uri)
        .env("NODE_ENV", "development")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {node} {script}: {e}"));
    let mut stderr = child.stderr.take().unwrap();
    let sink = Arc::clone(log);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let stdout = child.stdout.take().unwrap();
    let (ready, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Read every line (the pipe must not fill up); the first READY line is the start.
        let mut ready = Some(ready);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(issuer) = line.strip_prefix("READY ") {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(issuer.to_string());
                }
            }
        }
    });
    let want = format!("http://127.0.0.1:{port}");
    match ready_rx.recv_timeout(START_TIMEOUT) {
        Ok(issuer) if issuer == want => child,
        outcome => {
            let _ = child.kill();
            let status = child.wait();
            // Let the stderr thread catch up with the dead process's last words.
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "oidc-provider did not start on port {port} ({outcome:?}, {status:?}):\n{}",
                log.lock().unwrap()
            );
        }
    }
}
