//! The real `tollgate` binary, started on its own ports with a generated config: its own SQLite
//! file (or the run's Postgres), its own Redis prefix, an admin token, and a funded account.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{get, post_json, request, Response};
use crate::openai::FakeOpenAi;
use crate::services::{database_url, redis_url};

/// The `tollgate` binary cargo built for the calling test or bench, for [`Gateway::start`].
///
/// `CARGO_BIN_EXE_tollgate` exists only while cargo compiles the root package's tests and
/// benches, so it is read at the call site, never inside the kit.
#[macro_export]
macro_rules! tollgate_bin {
    () => {
        ::std::path::Path::new(env!("CARGO_BIN_EXE_tollgate"))
    };
}

/// A port free now and never handed out before in this process. The port is released before
/// its user binds it, so the OS may offer it again meanwhile; without the record, two tests
/// starting gateways at once could both be given it (one gateway's metrics port answering the
/// other's requests).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = StdListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system's temporary one.
pub fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tollgate-test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An e-mail no other test, run or process has used.
pub fn unique_email() -> String {
    format!(
        "u{}-{}-{}@example.com",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst),
        rand_suffix()
    )
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        % 1_000_000_007
}

/// Credits as the API shows them (a JSON number) in micro-credits, the ledger's unit.
pub fn micros(credits: &Value) -> i64 {
    (credits.as_f64().unwrap() * 1_000_000.0).round() as i64
}

/// `[timeouts]` short enough for tests.
pub const FAST_TIMEOUTS: &str =
    "[timeouts]\nconnect = 1\nresponse = 3\nstream_chunk = 2\nclient_idle = 3\n";

pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789abcdef";

/// A running gateway process on its own ports and config file.
pub struct Gateway {
    pub child: Child,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub config_path: PathBuf,
    pub dir: PathBuf,
    server_section: String,
    /// What it was started with, for [`Gateway::second`].
    opts: Opts,
    /// A funded account made at start (unless [`Opts::no_account`]).
    pub key: String,
    pub user_id: String,
}

/// How a test gateway is started.
#[derive(Clone, Default)]
pub struct Opts {
    /// The ledger to use; default: `TOLLGATE_TEST_DATABASE_URL` or a SQLite file of its own.
    pub database_url: Option<String>,
    /// Extra `[storage]` lines (hold expiry in crash tests).
    pub storage: String,
    /// Sign up an account and fund it with this many credits (default 1,000,000).
    pub credits: Option<f64>,
    /// No account at all (a second instance on another's database).
    pub no_account: bool,
    /// `[plans.*]` sections; default: a guest tier too generous to get in a test's way.
    pub plans: Option<String>,
    /// Plan of the funded account (default `business`, unlimited).
    pub plan: Option<String>,
    /// Redis key prefix; default a fresh one, so runs and tests never share counters.
    pub redis_prefix: Option<String>,
    /// Use this Redis instead of `TOLLGATE_TEST_REDIS_URL` (failure-mode tests).
    pub redis_url: Option<String>,
    /// `server.trusted_proxies`, one CIDR.
    pub trusted: Option<String>,
    /// The embedded default whatever the environment says: a SQLite file of its own and
    /// in-process counters (the end-to-end bench measures that set-up).
    pub embedded: bool,
    /// `TOLLGATE_LOG` (default `info`).
    pub log: Option<String>,
    /// `server.public_url` (default `http://` and the listen address).
    pub public_url: Option<String>,
    /// `server.graceful_shutdown_secs` (default 1).
    pub grace_secs: Option<u64>,
    /// Extra `[server]` lines (e.g. `admin_emails = ["ops@example.com"]`).
    pub server_extra: String,
    /// The `[abuse]` section; default: signups and logins per address too generous to get in
    /// a test's way (every test signs up from 127.0.0.1).
    pub abuse: Option<String>,
    /// Extra environment of the process (e.g. `TOLLGATE_CLOCK_OFFSET_MS`).
    pub env: Vec<(String, String)>,
    /// Start it with this soft and hard open-file limit (through util-linux's `prlimit`, as a
    /// service manager would).
    pub nofile: Option<(u64, u64)>,
}

impl Gateway {
    /// Starts `bin` (see [`tollgate_bin!`](crate::tollgate_bin)) with `body` (providers, models,
    /// aliases, timeouts) under a generated `[server]` section, waits until its ledger answers,
    /// and makes the funded account.
    pub async fn start(bin: &Path, body: &str) -> Gateway {
        Self::start_opts(bin, body, Opts::default()).await
    }

    pub async fn start_opts(bin: &Path, body: &str, opts: Opts) -> Gateway {
        let dir = temp_dir();
        let db = match (&opts.database_url, opts.embedded) {
            (Some(db), _) => db.clone(),
            (None, true) => format!("sqlite://{}/ledger.db", dir.display()),
            (None, false) => database_url(&dir),
        };
        // The run's Postgres through the pooler, when the run has one.
        let pooled = match crate::services::pooler_url() {
            Some(p) if db == database_url(&dir) => Some(p),
            _ => None,
        };
        let db = pooled.clone().unwrap_or(db);
        let redis = match opts.redis_url.clone() {
            Some(r) => Some(r),
            None if opts.embedded => None,
            None => redis_url(),
        };
        let prefix = opts
            .redis_prefix
            .clone()
            .unwrap_or_else(|| format!("tgtest{}", rand_suffix()));
        let mut storage = opts.storage.clone();
        if pooled.is_some() && !storage.contains("postgres_pooler") {
            storage.push_str("\npostgres_pooler = \"transaction\"\n");
        }
        if let Some(r) = redis {
            storage.push_str(&format!(
                "\nredis_url = \"{r}\"\nredis_prefix = \"{prefix}\"\n"
            ));
        }
        let trusted = opts
            .trusted
            .as_ref()
            .map(|t| format!("\"{t}\""))
            .unwrap_or_default();
        let plans = opts.plans.clone().unwrap_or_else(|| {
            "[plans.guest]\nrequests_per_hour = 100000\nrequests_per_day = 100000\n".into()
        });
        let grace = opts.grace_secs.unwrap_or(1);
        let server_extra = opts.server_extra.clone();
        let abuse = opts.abuse.clone().unwrap_or_else(|| {
            "[abuse]\nsignups_per_hour = 100000\nsignups_per_day = 100000\nlogins_per_hour = 100000\nlogins_per_day = 100000\n".into()
        });
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let metrics_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let public_url = opts
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let server_section = format!(
            "[server]\nlisten = \"{addr}\"\npublic_url = \"{public_url}\"\nmetrics_listen = \"{metrics_addr}\"\nthreads = 2\ngraceful_shutdown_secs = {grace}\nmax_body_bytes = 8388608\ntrusted_proxies = [{trusted}]\n{server_extra}\n\n[storage]\ndatabase_url = \"{db}\"\n{storage}\n\n{plans}\n{abuse}\n"
        );
        let config_path = dir.join("tollgate.toml");
        std::fs::write(&config_path, format!("{server_section}{body}")).unwrap();
        let child = spawn(bin, &config_path, &dir.join("gateway.log"), &opts, false);
        let mut gw = Gateway {
            child,
            addr,
            metrics_addr,
            config_path,
            dir,
            server_section,
            opts: opts.clone(),
            key: String::new(),
            user_id: String::new(),
        };
        let start = Instant::now();
        loop {
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(gw.addr)).await
            {
                let _ = s
                    .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .await;
                let mut buf = Vec::new();
                let _ = s.read_to_end(&mut buf).await;
                // Up once the ledger answers (providers may be down on purpose).
                if String::from_utf8_lossy(&buf).contains("\"ledger\":true") {
                    break;
                }
            }
            if let Ok(Some(status)) = gw.child.try_wait() {
                panic!("gateway exited with {status}: {}", gw.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "gateway did not start: {}",
                gw.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !opts.no_account {
            let (user_id, key) = gw.signup(&unique_email()).await;
            gw.admin_credits(&user_id, opts.credits.unwrap_or(1_000_000.0) - 100.0)
                .await;
            gw.admin_plan(
                &user_id,
                opts.plan.as_deref().unwrap_or("business"),
                None,
                None,
            )
            .await;
            gw.user_id = user_id;
            gw.key = key;
        }
        gw
    }

    /// Starts another instance of this gateway's deployment: `bin` on `body`, with the [`Opts`]
    /// this one was started with (its `storage` lines, plans, limits, Redis), on this one's
    /// database and, when it counts in Redis, under its Redis prefix: the two share one ledger
    /// and one set of counters. It has no account of its own; requests use this one's
    /// [`key`](Gateway::key).
    pub async fn second(&self, bin: &Path, body: &str) -> Gateway {
        let opts = Opts {
            database_url: Some(self.config_db()),
            redis_prefix: self.redis_prefix(),
            no_account: true,
            ..self.opts.clone()
        };
        Self::start_opts(bin, body, opts).await
    }

    /// Signs up an account; returns (user_id, api_key).
    pub async fn signup(&self, email: &str) -> (String, String) {
        let r = post_json(
            self.addr,
            "/api/v1/auth/signup",
            &serde_json::json!({"email": email, "password": "correct horse battery"}),
        )
        .await;
        assert_eq!(r.status, 201, "signup: {}", r.text());
        let v = r.json();
        (
            v["user_id"].as_str().unwrap().to_string(),
            v["api_key"].as_str().unwrap().to_string(),
        )
    }

    /// Logs in (the signup password); returns the `Cookie` pair of the dashboard session.
    pub async fn login(&self, email: &str) -> String {
        let r = post_json(
            self.addr,
            "/api/v1/auth/login",
            &serde_json::json!({"email": email, "password": "correct horse battery"}),
        )
        .await;
        assert_eq!(r.status, 200, "login: {}", r.text());
        let cookie = r.header("set-cookie").expect("a session cookie");
        cookie.split(';').next().unwrap_or_default().to_string()
    }

    /// Adds (or with a negative delta, removes) credits through the admin API.
    pub async fn admin_credits(&self, user_id: &str, delta: f64) -> Value {
        if delta == 0.0 {
            return Value::Null;
        }
        let body =
            serde_json::to_vec(&serde_json::json!({"delta": delta, "reason": "test funding"}))
                .unwrap();
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let r = request(
            self.addr,
            "POST",
            &format!("/api/v1/admin/accounts/{user_id}/credits"),
            &[("Authorization", &auth)],
            &body,
        )
        .await;
        assert_eq!(r.status, 200, "admin credits: {}", r.text());
        r.json()
    }

    /// Sets a plan (and per-account limits) through the admin API.
    pub async fn admin_plan(
        &self,
        user_id: &str,
        plan: &str,
        per_hour: Option<u64>,
        per_day: Option<u64>,
    ) {
        let body = serde_json::to_vec(&serde_json::json!({"plan": plan, "requests_per_hour": per_hour, "requests_per_day": per_day})).unwrap();
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let r = request(
            self.addr,
            "PUT",
            &format!("/api/v1/admin/accounts/{user_id}/plan"),
            &[("Authorization", &auth)],
            &body,
        )
        .await;
        assert_eq!(r.status, 200, "admin plan: {}", r.text());
    }

    /// The Redis prefix this gateway counts under (for a second instance sharing its limits).
    pub fn redis_prefix(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.config_path).unwrap();
        let line = text.lines().find(|l| l.starts_with("redis_prefix"))?;
        Some(line.split('"').nth(1)?.to_string())
    }

    /// The account as `/api/v1/auth/me` shows it to this key.
    pub async fn me(&self, key: &str) -> Value {
        let auth = format!("Bearer {key}");
        let r = request(
            self.addr,
            "GET",
            "/api/v1/auth/me",
            &[("Authorization", &auth)],
            b"",
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }

    /// The balance `/api/v1/auth/me` shows this key, in micro-credits.
    pub async fn balance(&self, key: &str) -> i64 {
        micros(&self.me(key).await["credits"])
    }

    /// `/api/v1/usage` as this key sees it.
    pub async fn usage(&self, key: &str) -> Value {
        let auth = format!("Bearer {key}");
        let r = request(
            self.addr,
            "GET",
            "/api/v1/usage",
            &[("Authorization", &auth)],
            b"",
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    }

    /// The account as the admin API shows it.
    pub async fn admin_account(&self, user_id: &str) -> Value {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        request(
            self.addr,
            "GET",
            &format!("/api/v1/admin/accounts/{user_id}"),
            &[("Authorization", &auth)],
            b"",
        )
        .await
        .json()
    }

    /// A request with this `Authorization` header value and a JSON content type.
    pub async fn with_auth(&self, method: &str, path: &str, auth: &str, body: &[u8]) -> Response {
        request(
            self.addr,
            method,
            path,
            &[
                ("Authorization", auth),
                ("Content-Type", "application/json"),
            ],
            body,
        )
        .await
    }

    /// A JSON request with `key` as its bearer token.
    pub async fn api_as(&self, key: &str, method: &str, path: &str, body: &Value) -> Response {
        let auth = format!("Bearer {key}");
        self.with_auth(method, path, &auth, body.to_string().as_bytes())
            .await
    }

    /// A chat request with `key`, or as a guest.
    pub async fn chat_as(&self, key: Option<&str>, body: &Value) -> Response {
        let b = serde_json::to_vec(body).unwrap();
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(a) = &auth {
            headers.push(("Authorization", a));
        }
        request(self.addr, "POST", "/v1/chat/completions", &headers, &b).await
    }

    /// The database this gateway uses, for the test to read (straight to Postgres when the
    /// gateway reaches it through the run's pooler: `services::pooler_url`).
    pub fn config_db(&self) -> String {
        let db = self.ledger_url();
        match (
            crate::services::pooler_url(),
            std::env::var("TOLLGATE_TEST_DATABASE_URL"),
        ) {
            (Some(p), Ok(direct)) if p == db => direct,
            _ => db,
        }
    }

    /// The `database_url` of its config.
    fn ledger_url(&self) -> String {
        let text = std::fs::read_to_string(&self.config_path).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("database_url"))
            .unwrap();
        line.split('"').nth(1).unwrap().to_string()
    }

    /// The log of its process, and of every process that replaced it ([`Gateway::upgrade`]).
    pub fn log(&self) -> String {
        let mut text = std::fs::read_to_string(self.dir.join("gateway.log")).unwrap_or_default();
        for n in 1.. {
            match std::fs::read_to_string(self.dir.join(format!("gateway-{n}.log"))) {
                Ok(t) => text.push_str(&t),
                Err(_) => break,
            }
        }
        text
    }

    /// Replaces this gateway's process by a new one started with `--upgrade` on its config
    /// (rewritten with `body` first when given: a config-changing restart), which takes the
    /// listening sockets over; waits until the new process accepts (or, with no instance to
    /// take over from, until it answers) and returns the old process, stopping.
    // The old process is the caller's to wait on; if the test fails first, it stops by itself
    // once the new one accepts.
    #[allow(clippy::zombie_processes)]
    pub async fn upgrade(&mut self, bin: &Path, body: Option<&str>) -> Child {
        if let Some(body) = body {
            std::fs::write(&self.config_path, format!("{}{body}", self.server_section)).unwrap();
        }
        let n = (1..)
            .find(|n| !self.dir.join(format!("gateway-{n}.log")).exists())
            .unwrap_or(1);
        let log = self.dir.join(format!("gateway-{n}.log"));
        let child = spawn(bin, &self.config_path, &log, &self.opts, true);
        let old = std::mem::replace(&mut self.child, child);
        let start = Instant::now();
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("upgrade: accepting") {
                return old;
            }
            // No instance to take over from: a first start, up once it answers.
            if text.contains("no instance to take over from")
                && get(self.addr, "/readyz").await.status == 200
            {
                return old;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the upgrading process exited with {status}: {text}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the upgrade did not complete: {text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Rewrites the config body (keeping the server section) and sends SIGHUP.
    pub fn reload_with(&self, body: &str) {
        std::fs::write(&self.config_path, format!("{}{body}", self.server_section)).unwrap();
        self.signal("HUP");
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([format!("-{sig}"), self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// A chat request with the funded account's key.
    pub async fn chat(&self, body: Value) -> Response {
        self.chat_as(Some(&self.key), &body).await
    }

    pub async fn is_healthy(&self) -> bool {
        get(self.addr, "/healthz").await.status == 200
    }

    /// The sum of the samples of `series` in `/metrics` (a metric's name, with its labels as
    /// the exposition writes them to pick some): 0 when there are none.
    pub async fn metric(&self, series: &str) -> f64 {
        let text = get(self.metrics_addr, "/metrics").await.text();
        text.lines()
            .filter(|l| l.starts_with(series))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts `bin serve --config config_path` (with `--upgrade` when `upgrade`), its log in `log`.
fn spawn(bin: &Path, config_path: &Path, log: &Path, opts: &Opts, upgrade: bool) -> Child {
    let log = std::fs::File::create(log).unwrap();
    let mut command = match opts.nofile {
        Some((soft, hard)) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={soft}:{hard}")).arg("--").arg(bin);
            c
        }
        None => Command::new(bin),
    };
    command.args(["serve", "--config"]).arg(config_path);
    if upgrade {
        command.arg("--upgrade");
    }
    command
        .env("TOLLGATE_LOG", opts.log.as_deref().unwrap_or("info"))
        .env("TOLLGATE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env(
            "TOLLGATE_TEST_ANTHROPIC_KEY",
            crate::anthropic::FAKE_ANTHROPIC_KEY,
        )
        .env("TOLLGATE_TEST_STRIPE_KEY", crate::stripe::FAKE_STRIPE_KEY)
        .env(
            "TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET",
            format!(
                "{},{}",
                crate::stripe::WEBHOOK_SECRET,
                crate::stripe::WEBHOOK_SECRET_OLD
            ),
        )
        .envs(opts.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()))
}

/// A `[[providers]]` block whose endpoints are these fakes.
pub fn provider(name: &str, fakes: &[&FakeOpenAi], extra: &str) -> String {
    let eps: Vec<String> = fakes.iter().map(|f| format!("\"{}\"", f.url())).collect();
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nendpoints = [{}]\n{extra}\n",
        eps.join(", ")
    )
}

/// A `[[models]]` block at 1 credit / 1K input and 2 / 1K output tokens, served upstream as
/// `up-<id>`.
pub fn model(id: &str, provider: &str, tier: &str, extra: &str) -> String {
    format!(
        "[[models]]\nid = \"{id}\"\nprovider = \"{provider}\"\nupstream_model = \"up-{id}\"\ntier = \"{tier}\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 2\nmax_output_tokens = 1000\n{extra}\n"
    )
}

/// The config most tests start from: [`FAST_TIMEOUTS`], provider `p` on `fake`, and one
/// economy model `id` on it ([`model`]'s prices). Append sections (`[mcp]`, `[billing]`, ...)
/// to it.
pub fn one_model_config(fake: &FakeOpenAi, id: &str) -> String {
    format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[fake], ""),
        model(id, "p", "economy", "")
    )
}

/// A gateway in front of one fake provider `p` with a paid model (`paid-2024-01-01`, tier
/// economy) and a guest one (`free-2024-01-01`, tier normal, `guest = true`): what the
/// account, key, session and admin tests start.
pub async fn paid_and_free(bin: &Path) -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}",
        provider("p", &[&fake], ""),
        model("paid-2024-01-01", "p", "economy", ""),
        model("free-2024-01-01", "p", "normal", "guest = true"),
    );
    let gw = Gateway::start(bin, &cfg).await;
    (fake, gw)
}

/// Small plan limits, so a test reaches them in a few requests: `free` 3/h 5/day, `pro` 4/h,
/// `guest` 2/h 2/day, `smb` 10/h 3/day.
pub const SMALL_PLANS: &str = "[plans.free]\nrequests_per_hour = 3\nrequests_per_day = 5\n\n[plans.pro]\nrequests_per_hour = 4\n\n[plans.guest]\nrequests_per_hour = 2\nrequests_per_day = 2\n\n[plans.smb]\nrequests_per_hour = 10\nrequests_per_day = 3\n";

/// A gateway on [`SMALL_PLANS`] (with `extra` appended to that TOML), its test account on
/// `plan`, in front of one fake provider `p` with a model `m` and a guest model `g`.
pub async fn small_plans(bin: &Path, extra: &str, plan: &str) -> (FakeOpenAi, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", ""),
        model("g", "p", "normal", "guest = true"),
    );
    let opts = Opts {
        plans: Some(format!("{SMALL_PLANS}{extra}")),
        plan: Some(plan.into()),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(bin, &cfg, opts).await;
    (fake, gw)
}
