//! The TOML config (DESIGN.md, Config): serde structs that refuse unknown keys, then a
//! validation pass that reports every problem with its key path, so `check-config` can print
//! them all at once instead of one per run.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tollgate_filters::ratelimit::Cidr;
use tollgate_filters::route::{Catalog, ModelSpec, Tier, MIN_NOTICE_SECS};
use tollgate_filters::time::parse_date;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub storage: StorageConfig,
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    #[serde(default)]
    pub plans: BTreeMap<String, PlanConfig>,
    /// Checked by the issues that add billing and MCP; accepted here so one file serves all.
    #[serde(default)]
    pub billing: Option<toml::Table>,
    #[serde(default)]
    pub mcp: Option<toml::Table>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: String,
    pub metrics_listen: String,
    pub public_url: String,
    pub admin_token_env: String,
    pub trusted_proxies: Vec<String>,
    pub max_body_bytes: usize,
    /// Worker threads of the proxy service (Pingora's `threads`).
    pub threads: usize,
    /// Seconds a stopping instance keeps serving in-flight requests.
    pub graceful_shutdown_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8080".into(),
            metrics_listen: "127.0.0.1:9464".into(),
            public_url: "http://127.0.0.1:8080".into(),
            admin_token_env: "TOLLGATE_ADMIN_TOKEN".into(),
            trusted_proxies: vec![],
            max_body_bytes: 4 * 1024 * 1024,
            threads: 2,
            graceful_shutdown_secs: 10,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    pub database_url: String,
    pub redis_url: String,
    /// A credit hold left by a crashed instance is refunded after this long. Longer than any
    /// request may run.
    pub hold_ttl_secs: f64,
    /// How often each instance looks for expired holds.
    pub hold_reap_interval_secs: f64,
    /// `fail_open` (serve and count in-process when Redis fails) or `fail_closed` (503).
    pub redis_failure_mode: String,
    /// How long a rate-limit check may wait for Redis before the failure mode applies.
    pub redis_timeout_ms: u64,
    /// Prefix of every Redis key, so several deployments can share one Redis.
    pub redis_prefix: String,
    /// Credit leases (src/leases.rs): an instance reserves this many requests' worth of an
    /// account's holds at once and meters against it in memory. 0 turns leases off (every
    /// request holds and settles in the database).
    pub lease_holds: u64,
    /// How often an instance writes its leased settlements (usage rows) to the ledger.
    pub lease_sync_ms: u64,
    /// A lease unused for this long is returned to the account's balance.
    pub lease_idle_secs: f64,
    /// Admission leases with Redis (src/limits.rs): admissions reserved per Redis round trip
    /// while an account is far from its limits. 0: every request is checked in Redis.
    pub rate_limit_lease: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            database_url: "sqlite://data/tollgate.db".into(),
            redis_url: String::new(),
            hold_ttl_secs: 900.0,
            hold_reap_interval_secs: 30.0,
            redis_failure_mode: "fail_open".into(),
            redis_timeout_ms: 250,
            redis_prefix: "tg".into(),
            lease_holds: 256,
            lease_sync_ms: 20,
            lease_idle_secs: 2.0,
            rate_limit_lease: 64,
        }
    }
}

/// Seconds (fractions allowed, so tests can use short ones).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsConfig {
    pub connect: f64,
    pub response: f64,
    pub stream_chunk: f64,
    pub client_idle: f64,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        TimeoutsConfig {
            connect: 10.0,
            response: 25.0,
            stream_chunk: 25.0,
            client_idle: 30.0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub name: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    pub endpoints: Vec<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub health_check: Option<HealthCheckConfig>,
    #[serde(default)]
    pub self_hosted: bool,
    /// Consecutive failed requests that eject an endpoint (passive health).
    #[serde(default = "default_eject_after")]
    pub eject_after_failures: u32,
    /// Seconds an ejected endpoint is skipped before it is tried again.
    #[serde(default = "default_eject_secs")]
    pub eject_secs: f64,
}

fn default_kind() -> String {
    "openai".into()
}
fn default_eject_after() -> u32 {
    3
}
fn default_eject_secs() -> f64 {
    30.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckConfig {
    #[serde(default = "default_hc_path")]
    pub path: String,
    #[serde(default = "default_hc_interval")]
    pub interval_ms: u64,
    #[serde(default = "default_hc_timeout")]
    pub timeout_ms: u64,
}

fn default_hc_path() -> String {
    "/v1/models".into()
}
fn default_hc_interval() -> u64 {
    5000
}
fn default_hc_timeout() -> u64 {
    2000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub id: String,
    pub provider: String,
    #[serde(default)]
    pub upstream_model: Option<String>,
    pub tier: String,
    pub input_credits_per_1k: f64,
    pub output_credits_per_1k: f64,
    #[serde(default = "default_max_output")]
    pub max_output_tokens: u64,
    #[serde(default)]
    pub guest: bool,
    #[serde(default)]
    pub deprecated_at: Option<String>,
    #[serde(default)]
    pub retires_at: Option<String>,
    #[serde(default)]
    pub replacement: Option<String>,
}

fn default_max_output() -> u64 {
    4096
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PlanConfig {
    pub requests_per_hour: Option<u64>,
    pub requests_per_day: Option<u64>,
    pub grant_credits: Option<f64>,
    pub stripe_price: Option<String>,
}

/// One upstream endpoint of a pool, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path prefix before `/v1/...`, without a trailing slash ("" for none).
    pub base_path: String,
}

impl EndpointUrl {
    pub fn parse(s: &str) -> Result<EndpointUrl, String> {
        let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else {
            return Err("must start with http:// or https://".into());
        };
        let (authority, path) = match rest.find('/') {
            Some(p) => (&rest[..p], &rest[p..]),
            None => (rest, ""),
        };
        let default_port = if tls { 443 } else { 80 };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or("unclosed [ in host")?;
            let port = match &v6[end + 1..] {
                "" => default_port,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or("bad port")?,
            };
            (v6[..end].to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| "bad port")?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err("has no host".into());
        }
        if path.contains('?') || path.contains('#') {
            return Err("must not have a query or fragment".into());
        }
        Ok(EndpointUrl {
            tls,
            host,
            port,
            base_path: path.trim_end_matches('/').to_string(),
        })
    }

    /// The Host header value.
    pub fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub connect: Duration,
    pub response: Duration,
    pub stream_chunk: Duration,
    pub client_idle: Duration,
}

#[derive(Debug, Clone)]
pub struct Provider {
    pub name: String,
    pub endpoints: Vec<EndpointUrl>,
    pub api_key: Option<String>,
    pub health_check: Option<HealthCheckConfig>,
    pub self_hosted: bool,
    pub eject_after_failures: u32,
    pub eject_for: Duration,
}

/// A validated config: what the gateway runs on.
#[derive(Debug, Clone)]
pub struct Config {
    pub raw: RawConfig,
    pub listen: SocketAddr,
    pub metrics_listen: Option<SocketAddr>,
    pub timeouts: Timeouts,
    pub providers: Vec<Provider>,
    pub catalog: Catalog,
    pub trusted_proxies: Vec<Cidr>,
}

/// One problem in a config file, with the key path it sits at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

pub fn load_file(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ConfigError {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
        }]
    })?;
    parse(&text)
}

fn secs(path: &str, v: f64, errs: &mut Vec<ConfigError>) -> Duration {
    if !(v.is_finite() && v > 0.0 && v < 86_400.0) {
        errs.push(err(path, "must be a number of seconds above 0"));
        return Duration::from_secs(1);
    }
    Duration::from_secs_f64(v)
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
        message: message.into(),
    }
}

/// Credits per 1K tokens as written in the config, to integer micro-credits.
fn micros(path: &str, v: f64, errs: &mut Vec<ConfigError>) -> u64 {
    if !(v.is_finite() && (0.0..=1_000_000.0).contains(&v)) {
        errs.push(err(path, "must be a number from 0 to 1000000"));
        return 0;
    }
    (v * 1_000_000.0).round() as u64
}

pub fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        let span = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].lines().count().max(1);
                format!("line {line}")
            })
            .unwrap_or_else(|| "config".into());
        vec![err(span, e.message().to_string())]
    })?;
    validate(raw)
}

pub fn validate(raw: RawConfig) -> Result<Config, Vec<ConfigError>> {
    let mut errs = Vec::new();
    let listen = raw.server.listen.parse::<SocketAddr>().unwrap_or_else(|_| {
        errs.push(err(
            "server.listen",
            "must be an address like 127.0.0.1:8080",
        ));
        SocketAddr::from(([127, 0, 0, 1], 0))
    });
    let metrics_listen = if raw.server.metrics_listen.is_empty() {
        None
    } else {
        match raw.server.metrics_listen.parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                errs.push(err("server.metrics_listen", "must be an address or empty"));
                None
            }
        }
    };
    if raw.server.max_body_bytes < 1024 {
        errs.push(err("server.max_body_bytes", "must be at least 1024"));
    }
    if raw.server.threads == 0 {
        errs.push(err("server.threads", "must be at least 1"));
    }
    let t = &raw.timeouts;
    let timeouts = Timeouts {
        connect: secs("timeouts.connect", t.connect, &mut errs),
        response: secs("timeouts.response", t.response, &mut errs),
        stream_chunk: secs("timeouts.stream_chunk", t.stream_chunk, &mut errs),
        client_idle: secs("timeouts.client_idle", t.client_idle, &mut errs),
    };

    secs(
        "storage.hold_ttl_secs",
        raw.storage.hold_ttl_secs,
        &mut errs,
    );
    secs(
        "storage.hold_reap_interval_secs",
        raw.storage.hold_reap_interval_secs,
        &mut errs,
    );
    if crate::limits::FailureMode::parse(&raw.storage.redis_failure_mode).is_none() {
        errs.push(err(
            "storage.redis_failure_mode",
            "must be fail_open or fail_closed",
        ));
    }
    secs(
        "storage.lease_idle_secs",
        raw.storage.lease_idle_secs,
        &mut errs,
    );
    if !(1..=10_000).contains(&raw.storage.lease_sync_ms) {
        errs.push(err("storage.lease_sync_ms", "must be 1 to 10000"));
    }
    if raw.storage.rate_limit_lease > 10_000 {
        errs.push(err("storage.rate_limit_lease", "must be 0 (off) to 10000"));
    }
    if raw.storage.lease_holds > 1_000_000 {
        errs.push(err("storage.lease_holds", "must be 0 (off) to 1000000"));
    }
    if raw.storage.redis_timeout_ms == 0 {
        errs.push(err("storage.redis_timeout_ms", "must be above 0"));
    }
    let r = &raw.storage.redis_url;
    if !(r.is_empty() || r.starts_with("redis://") || r.starts_with("rediss://")) {
        errs.push(err(
            "storage.redis_url",
            "must be empty or start with redis://",
        ));
    }
    let mut trusted_proxies = Vec::new();
    for (i, c) in raw.server.trusted_proxies.iter().enumerate() {
        match Cidr::parse(c) {
            Some(c) => trusted_proxies.push(c),
            None => errs.push(err(
                format!("server.trusted_proxies[{i}]"),
                "must be an IP or CIDR like 10.0.0.0/8",
            )),
        }
    }
    let db = &raw.storage.database_url;
    if !(db.starts_with("sqlite:")
        || db.starts_with("postgres://")
        || db.starts_with("postgresql://"))
    {
        errs.push(err(
            "storage.database_url",
            "must start with sqlite:, postgres:// or postgresql://",
        ));
    }

    let mut providers = Vec::new();
    for (i, p) in raw.providers.iter().enumerate() {
        let at = |k: &str| format!("providers[{i}].{k}");
        if p.name.is_empty() {
            errs.push(err(at("name"), "must not be empty"));
        }
        if raw.providers[..i].iter().any(|q| q.name == p.name) {
            errs.push(err(at("name"), format!("duplicate provider `{}`", p.name)));
        }
        if p.kind != "openai" {
            errs.push(err(
                at("kind"),
                format!("unknown kind `{}`; supported: openai", p.kind),
            ));
        }
        if p.endpoints.is_empty() {
            errs.push(err(at("endpoints"), "must list at least one URL"));
        }
        let mut endpoints = Vec::new();
        for (j, e) in p.endpoints.iter().enumerate() {
            match EndpointUrl::parse(e) {
                Ok(u) => endpoints.push(u),
                Err(m) => errs.push(err(format!("providers[{i}].endpoints[{j}]"), m)),
            }
        }
        if let Some(hc) = &p.health_check {
            if !hc.path.starts_with('/') {
                errs.push(err(at("health_check.path"), "must start with /"));
            }
            if hc.interval_ms < 10 {
                errs.push(err(at("health_check.interval_ms"), "must be at least 10"));
            }
            if hc.timeout_ms == 0 {
                errs.push(err(at("health_check.timeout_ms"), "must be above 0"));
            }
        }
        if p.eject_after_failures == 0 {
            errs.push(err(at("eject_after_failures"), "must be at least 1"));
        }
        let eject_for = secs(&at("eject_secs"), p.eject_secs, &mut errs);
        // A missing key variable is not an error: local providers need no key.
        let api_key = p
            .api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        providers.push(Provider {
            name: p.name.clone(),
            endpoints,
            api_key,
            health_check: p.health_check.clone(),
            self_hosted: p.self_hosted,
            eject_after_failures: p.eject_after_failures,
            eject_for,
        });
    }

    let mut models = Vec::new();
    for (i, m) in raw.models.iter().enumerate() {
        let at = |k: &str| format!("models[{i}].{k}");
        if m.id.is_empty() || m.id.chars().any(char::is_whitespace) {
            errs.push(err(at("id"), "must be non-empty without spaces"));
        }
        if Tier::parse(&m.id).is_some() {
            errs.push(err(at("id"), "must not be a tier name"));
        }
        if raw.models[..i].iter().any(|q| q.id == m.id) {
            errs.push(err(at("id"), format!("duplicate model `{}`", m.id)));
        }
        let provider = raw.providers.iter().find(|p| p.name == m.provider);
        if provider.is_none() {
            errs.push(err(
                at("provider"),
                format!("unknown provider `{}`", m.provider),
            ));
        }
        let tier = Tier::parse(&m.tier).unwrap_or_else(|| {
            errs.push(err(at("tier"), "must be economy, normal or powerful"));
            Tier::Normal
        });
        if m.max_output_tokens == 0 {
            errs.push(err(at("max_output_tokens"), "must be at least 1"));
        }
        let date = |k: &str, v: &Option<String>, errs: &mut Vec<ConfigError>| {
            v.as_ref().and_then(|s| {
                let d = parse_date(s);
                if d.is_none() {
                    errs.push(err(at(k), "must be a date YYYY-MM-DD"));
                }
                d
            })
        };
        let deprecated_at = date("deprecated_at", &m.deprecated_at, &mut errs);
        let retires_at = date("retires_at", &m.retires_at, &mut errs);
        match (deprecated_at, retires_at) {
            (Some(d), Some(r)) if r - d < MIN_NOTICE_SECS => errs.push(err(
                at("retires_at"),
                "must be at least 30 days after deprecated_at",
            )),
            (None, Some(_)) => errs.push(err(
                at("deprecated_at"),
                "is required with retires_at (30 days of notice)",
            )),
            _ => {}
        }
        if let Some(rep) = &m.replacement {
            if !raw.models.iter().any(|q| &q.id == rep) || rep == &m.id {
                errs.push(err(at("replacement"), format!("unknown model `{rep}`")));
            }
        }
        models.push(ModelSpec {
            id: m.id.clone(),
            provider: m.provider.clone(),
            upstream_model: m.upstream_model.clone().unwrap_or_else(|| m.id.clone()),
            tier,
            input_micros_per_1k: micros(
                &at("input_credits_per_1k"),
                m.input_credits_per_1k,
                &mut errs,
            ),
            output_micros_per_1k: micros(
                &at("output_credits_per_1k"),
                m.output_credits_per_1k,
                &mut errs,
            ),
            max_output_tokens: m.max_output_tokens,
            guest: m.guest,
            self_hosted: provider.is_some_and(|p| p.self_hosted),
            deprecated_at,
            retires_at,
            replacement: m.replacement.clone(),
        });
    }
    let mut aliases = Vec::new();
    for (a, target) in &raw.aliases {
        let at = format!("aliases.\"{a}\"");
        if Tier::parse(a).is_some() {
            errs.push(err(&at, "must not be a tier name"));
        } else if raw.models.iter().any(|m| &m.id == a) {
            errs.push(err(&at, "must not shadow a model id"));
        } else if !raw.models.iter().any(|m| &m.id == target) {
            errs.push(err(&at, format!("points at unknown model `{target}`")));
        }
        aliases.push((a.clone(), target.clone()));
    }
    for (name, plan) in &raw.plans {
        for (k, v) in [
            ("requests_per_hour", plan.requests_per_hour),
            ("requests_per_day", plan.requests_per_day),
        ] {
            if v == Some(0) {
                errs.push(err(
                    format!("plans.{name}.{k}"),
                    "must be at least 1 (omit for no limit)",
                ));
            }
        }
    }

    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Config {
        listen,
        metrics_listen,
        timeouts,
        providers,
        catalog: Catalog::new(models, aliases),
        trusted_proxies,
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls() {
        let u = EndpointUrl::parse("https://api.openai.com").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.base_path.as_str()),
            (true, "api.openai.com", 443, "")
        );
        let u = EndpointUrl::parse("http://127.0.0.1:9000/openai/").unwrap();
        assert_eq!(
            (u.port, u.base_path.as_str(), u.authority()),
            (9000, "/openai", "127.0.0.1:9000".into())
        );
        let u = EndpointUrl::parse("http://[::1]:81").unwrap();
        assert_eq!(u.authority(), "[::1]:81");
        for bad in ["ftp://x", "http://", "http://h:notaport", "http://h/x?y=1"] {
            assert!(EndpointUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reports_every_error_with_its_path() {
        let text = r#"
[server]
listen = "nowhere"
[timeouts]
connect = -1
[[providers]]
name = "p"
kind = "grpc"
endpoints = ["ftp://x"]
[[models]]
id = "m"
provider = "q"
tier = "cheap"
input_credits_per_1k = 1
output_credits_per_1k = 1
deprecated_at = "2027-01-01"
retires_at = "2027-01-15"
replacement = "zzz"
[aliases]
"a" = "nope"
"#;
        let errs = parse(text).unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "server.listen",
            "timeouts.connect",
            "providers[0].kind",
            "providers[0].endpoints[0]",
            "models[0].provider",
            "models[0].tier",
            "models[0].retires_at",
            "models[0].replacement",
            "aliases.\"a\"",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
    }

    #[test]
    fn lease_settings_are_checked() {
        let errs =
            parse("[storage]\nlease_sync_ms = 0\nlease_idle_secs = -1\nlease_holds = 2000000\nrate_limit_lease = 20000\n")
                .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "storage.lease_sync_ms",
            "storage.lease_idle_secs",
            "storage.lease_holds",
            "storage.rate_limit_lease",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
        assert!(
            parse("[storage]\nlease_holds = 0\n").is_ok(),
            "0 turns leases off"
        );
    }

    #[test]
    fn unknown_keys_and_syntax_errors_are_refused() {
        assert!(parse("[server]\nlisten_on = \"x\"").is_err());
        assert!(parse("[[models]\n").is_err());
    }

    #[test]
    fn embedded_default_is_valid() {
        let text = include_str!("../conf/tollgate.toml");
        if let Err(e) = parse(text) {
            panic!("conf/tollgate.toml: {e:?}");
        }
        let text = include_str!("../conf/production.example.toml");
        if let Err(e) = parse(text) {
            panic!("conf/production.example.toml: {e:?}");
        }
    }
}
