//! `[[providers]]`: upstream pools, their kind (wire format), endpoints, key, health check and
//! the TLS trust of their https endpoints.

use std::time::Duration;

use serde::Deserialize;

use super::error::{err, secs, ConfigError};
pub use super::provider_tls::ProviderTls;
use super::provider_tls::{tls_of, TlsFiles};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub name: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Required, except for `kind = "demo"` (then the gateway's own listener).
    #[serde(default)]
    pub endpoints: Vec<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub health_check: Option<HealthCheck>,
    #[serde(default)]
    pub self_hosted: bool,
    /// Serves OpenAI's Responses API itself: `/v1/responses` requests reach it in their own
    /// shape instead of as chat completions (`kind = "openai"` only).
    #[serde(default)]
    pub responses_api: bool,
    /// How a resumed stream asks this provider to continue a partial answer (`kind =
    /// "openai"`; an Anthropic provider always takes it as a prefill): `prompt` (default),
    /// `continue_final_message` (vLLM, SGLang) or `prefix` (DeepSeek).
    #[serde(default)]
    pub continuation: Option<String>,
    /// Consecutive failed requests that eject an endpoint (passive health).
    #[serde(default = "default_eject_after")]
    pub eject_after_failures: u32,
    /// Seconds an ejected endpoint is skipped before it is tried again.
    #[serde(default = "default_eject_secs")]
    pub eject_secs: f64,
    /// PEM file of the CA certificate(s) its https endpoints are verified against, in place
    /// of the system's roots.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// PEM certificate (leaf first, then intermediates) presented for mutual TLS.
    #[serde(default)]
    pub client_cert_file: Option<String>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1, unencrypted) of `client_cert_file`.
    #[serde(default)]
    pub client_key_file: Option<String>,
    /// Seconds the provider keeps an unused prompt cached (sticky routing's affinity lasts as
    /// long); default by kind ([`default_cache_ttl`]).
    #[serde(default)]
    pub cache_ttl_secs: Option<f64>,
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
pub struct HealthCheck {
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

/// The wire format a provider speaks; `upstream::provider` holds what each kind means (path,
/// auth header, body format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Any OpenAI-compatible chat-completions API.
    OpenAi,
    /// Anthropic's Messages API (`/v1/messages`, `x-api-key`, `anthropic-version`).
    Anthropic,
    /// The gateway's own demo model (`/_demo`): canned replies in OpenAI's format, no key, no
    /// network; its endpoint defaults to the gateway's own listener.
    Demo,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 3] = [
        ProviderKind::OpenAi,
        ProviderKind::Anthropic,
        ProviderKind::Demo,
    ];

    pub fn parse(s: &str) -> Option<ProviderKind> {
        ProviderKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Demo => "demo",
        }
    }

    /// The wire format it speaks (the demo speaks OpenAI's).
    pub fn wire(self) -> ProviderKind {
        match self {
            ProviderKind::Demo => ProviderKind::OpenAi,
            k => k,
        }
    }
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
        // Joined, not `format!`ted: a tool call's request spells it every time.
        let host = if self.host.contains(':') {
            ["[", &self.host, "]"].concat()
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            [host.as_str(), ":", &self.port.to_string()].concat()
        }
    }
}

#[derive(Debug, Clone)]
pub struct Provider {
    pub name: String,
    pub kind: ProviderKind,
    pub endpoints: Vec<EndpointUrl>,
    pub api_key: Option<String>,
    pub health_check: Option<HealthCheck>,
    pub self_hosted: bool,
    pub responses_api: bool,
    /// How a resumed stream's continuation is asked of it.
    pub continuation: tollgate_filters::resume::request::Continuation,
    pub eject_after_failures: u32,
    pub eject_for: Duration,
    /// Trust and client certificate of its https endpoints, read from their files here.
    pub tls: ProviderTls,
    /// How long it keeps an unused prompt cached, unless a request asks for longer (sticky
    /// routing, `crate::routing`).
    pub cache_ttl: Duration,
}

/// How long a provider of `kind` keeps an unused prompt cached by default: Anthropic five
/// minutes; OpenAI "typically 5 to 10 minutes of inactivity" (its prompt-caching guide, on
/// in-memory retention), taken at the upper end.
pub fn default_cache_ttl(kind: ProviderKind) -> Duration {
    match kind {
        ProviderKind::Anthropic => Duration::from_secs(300),
        ProviderKind::OpenAi | ProviderKind::Demo => Duration::from_secs(600),
    }
}

/// `cache_ttl_secs` as written: whole or fractional seconds, from one second to a day.
fn cache_ttl(
    v: Option<f64>,
    kind: ProviderKind,
    at: &str,
    errs: &mut Vec<ConfigError>,
) -> Duration {
    match v {
        None => default_cache_ttl(kind),
        Some(s) if s.is_finite() && (1.0..=86_400.0).contains(&s) => Duration::from_secs_f64(s),
        Some(_) => {
            errs.push(err(at, "must be from 1 to 86400 seconds"));
            default_cache_ttl(kind)
        }
    }
}

/// Validates every provider; the index is each one's position in the file (for key paths).
/// `listen`: the gateway's own address, where a `demo` provider without endpoints is served.
pub(super) fn validate(
    sections: &[ProviderSection],
    listen: std::net::SocketAddr,
    errs: &mut Vec<ConfigError>,
) -> Vec<Provider> {
    let mut providers = Vec::new();
    for (i, p) in sections.iter().enumerate() {
        let at = |k: &str| format!("providers[{i}].{k}");
        if p.name.is_empty() {
            errs.push(err(at("name"), "must not be empty"));
        }
        if sections[..i].iter().any(|q| q.name == p.name) {
            errs.push(err(at("name"), format!("duplicate provider `{}`", p.name)));
        }
        let kind = ProviderKind::parse(&p.kind).unwrap_or_else(|| {
            let supported: Vec<_> = ProviderKind::ALL.iter().map(|k| k.as_str()).collect();
            errs.push(err(
                at("kind"),
                format!(
                    "unknown kind `{}`; supported: {}",
                    p.kind,
                    supported.join(", ")
                ),
            ));
            ProviderKind::OpenAi
        });
        let own;
        let listed: &[String] = if p.endpoints.is_empty() && kind == ProviderKind::Demo {
            let ip = match listen.ip() {
                a if a.is_unspecified() && a.is_ipv6() => "[::1]".to_owned(),
                a if a.is_unspecified() => "127.0.0.1".to_owned(),
                std::net::IpAddr::V6(a) => format!("[{a}]"),
                a => a.to_string(),
            };
            own = [format!("http://{ip}:{}/_demo", listen.port())];
            &own
        } else {
            &p.endpoints
        };
        if listed.is_empty() {
            errs.push(err(at("endpoints"), "must list at least one URL"));
        }
        let mut endpoints = Vec::new();
        for (j, e) in listed.iter().enumerate() {
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
        if p.responses_api && kind != ProviderKind::OpenAi {
            errs.push(err(
                at("responses_api"),
                "only an openai provider can serve the Responses API",
            ));
        }
        if p.eject_after_failures == 0 {
            errs.push(err(at("eject_after_failures"), "must be at least 1"));
        }
        let continuation = continuation(p, kind, &at("continuation"), errs);
        let files = TlsFiles {
            ca_file: p.ca_file.as_ref(),
            client_cert_file: p.client_cert_file.as_ref(),
            client_key_file: p.client_key_file.as_ref(),
        };
        let plain_only = !endpoints.is_empty() && !endpoints.iter().any(|e| e.tls);
        let tls = tls_of(files, plain_only, &at, errs);
        let eject_for = secs(&at("eject_secs"), p.eject_secs, errs);
        let cache_ttl = cache_ttl(p.cache_ttl_secs, kind, &at("cache_ttl_secs"), errs);
        // A missing key variable is not an error: local providers need no key.
        let api_key = p
            .api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        providers.push(Provider {
            name: p.name.clone(),
            kind,
            endpoints,
            api_key,
            health_check: p.health_check.clone(),
            self_hosted: p.self_hosted,
            responses_api: p.responses_api,
            continuation,
            eject_after_failures: p.eject_after_failures,
            eject_for,
            tls,
            cache_ttl,
        });
    }
    providers
}

/// A provider's continuation mode: an Anthropic provider continues a prefill; an
/// OpenAI-compatible one as configured, by the continuation prompt unless it says otherwise.
fn continuation(
    p: &ProviderSection,
    kind: ProviderKind,
    at: &str,
    errs: &mut Vec<ConfigError>,
) -> tollgate_filters::resume::request::Continuation {
    use tollgate_filters::resume::request::Continuation;
    match (kind, p.continuation.as_deref()) {
        (ProviderKind::Anthropic, None) => Continuation::Prefill,
        (ProviderKind::Anthropic, Some(_)) => {
            errs.push(err(at, "an anthropic provider always continues a prefill"));
            Continuation::Prefill
        }
        (_, None) => Continuation::Prompt,
        (_, Some(name)) => Continuation::parse(name).unwrap_or_else(|| {
            let names = Continuation::NAMES.join(", ");
            errs.push(err(at, format!("must be one of {names}")));
            Continuation::Prompt
        }),
    }
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

    fn section(endpoint: &str, tls: &str) -> ProviderSection {
        let text = format!("name = \"p\"\nendpoints = [\"{endpoint}\"]\n{tls}");
        toml::from_str(&text).unwrap()
    }

    fn tls_errors(endpoint: &str, tls: &str) -> Vec<String> {
        let listen = "127.0.0.1:8080".parse().unwrap();
        let mut errs = Vec::new();
        validate(&[section(endpoint, tls)], listen, &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn tls_keys_are_refused_on_a_plain_http_provider_and_when_half_set_or_unreadable() {
        let https = "https://h.example:8443";
        let e = tls_errors("http://h:8000", "ca_file = \"/nonexistent/ca.pem\"");
        assert_eq!(
            e,
            ["providers[0].ca_file: applies to https:// endpoints only, and this provider has none"]
        );
        let e = tls_errors(https, "ca_file = \"/nonexistent/ca.pem\"");
        assert!(e[0].starts_with("providers[0].ca_file: cannot read `/nonexistent/ca.pem`"));
        let e = tls_errors(https, "client_key_file = \"/k.pem\"");
        assert_eq!(
            e,
            ["providers[0].client_cert_file: must be set with client_key_file"]
        );
        assert!(tls_errors(https, "").is_empty());
    }

    #[test]
    fn kinds_round_trip_and_unknown_ones_are_refused() {
        for k in ProviderKind::ALL {
            assert_eq!(ProviderKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ProviderKind::parse("grpc"), None);
    }

    #[test]
    fn cache_ttls_default_by_kind_and_absurd_ones_are_refused() {
        let listen = "127.0.0.1:8080".parse().unwrap();
        let mut errs = Vec::new();
        let mut anthropic = section("http://h", "");
        anthropic.kind = "anthropic".into();
        anthropic.name = "a".into();
        let mut set = section("http://h", "cache_ttl_secs = 3600");
        set.name = "q".into();
        let got = validate(
            &[section("http://h", ""), anthropic, set],
            listen,
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        let ttls: Vec<u64> = got.iter().map(|p| p.cache_ttl.as_secs()).collect();
        assert_eq!(ttls, [600, 300, 3600]);
        for bad in ["0", "-5", "90000", "nan"] {
            let mut errs = Vec::new();
            validate(
                &[section("http://h", &format!("cache_ttl_secs = {bad}"))],
                listen,
                &mut errs,
            );
            let e: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            assert_eq!(
                e,
                ["providers[0].cache_ttl_secs: must be from 1 to 86400 seconds"],
                "{bad}"
            );
        }
    }
}
