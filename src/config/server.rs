//! `[server]`: listeners, the public URL, the admin token's variable, trusted proxies, limits
//! on bodies and threads.

use std::net::SocketAddr;

use serde::Deserialize;
use tollgate_filters::net::Cidr;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    pub listen: String,
    pub metrics_listen: String,
    pub public_url: String,
    pub admin_token_env: String,
    pub trusted_proxies: Vec<String>,
    pub max_body_bytes: usize,
    /// Proxy threads: one single-threaded service each (`proxy::listen::layout`).
    pub threads: usize,
    /// Seconds a stopping instance keeps serving in-flight requests.
    pub graceful_shutdown_secs: u64,
    /// Client connections held at once; 0: the open-file limit less a reserve
    /// (`proxy::capacity`).
    pub max_connections: usize,
    /// Accounts whose dashboard session may use the admin API (operators).
    pub admin_emails: Vec<String>,
    /// `text` (default) or `json`: one object per line for a log collector.
    pub log_format: String,
    /// Seconds between two resolutions of the providers' host names (`upstream::resolve`).
    pub dns_refresh_secs: f64,
    /// The Unix socket on which a running instance hands its listening sockets to one started
    /// with `--upgrade` (`proxy::handover`). Empty: `/tmp/tollgate-<port>.upgrade`; `off`: none.
    pub upgrade_socket: String,
}

/// The shape of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: "127.0.0.1:8080".into(),
            metrics_listen: "127.0.0.1:9464".into(),
            public_url: "http://127.0.0.1:8080".into(),
            admin_token_env: "TOLLGATE_ADMIN_TOKEN".into(),
            trusted_proxies: vec![],
            max_body_bytes: 4 * 1024 * 1024,
            threads: 2,
            graceful_shutdown_secs: 10,
            max_connections: 0,
            admin_emails: vec![],
            log_format: "text".into(),
            dns_refresh_secs: 30.0,
            upgrade_socket: String::new(),
        }
    }
}

/// The shortest admin token accepted: a guessable token is the whole ledger.
const MIN_ADMIN_TOKEN_CHARS: usize = 32;

#[derive(Debug, Clone)]
pub struct Server {
    pub listen: SocketAddr,
    /// `None`: no metrics listener.
    pub metrics_listen: Option<SocketAddr>,
    pub public_url: String,
    /// The SHA-256 (hex) of the token in `admin_token_env`, read at load time; `None`
    /// disables the admin API. Only the digest is kept, and presented tokens are compared by
    /// digest, so the comparison's time says nothing about the token's length or prefix.
    pub admin_token_digest: Option<String>,
    pub trusted_proxies: Vec<Cidr>,
    pub max_body_bytes: usize,
    pub threads: usize,
    pub graceful_shutdown_secs: u64,
    /// `None`: derived from the open-file limit at start.
    pub max_connections: Option<usize>,
    /// Lower-cased, as sign-up stores e-mails.
    pub admin_emails: Vec<String>,
    pub log_format: LogFormat,
    pub dns_refresh: std::time::Duration,
    /// `None`: upgrades off (`upgrade_socket = "off"`, or a listener on any free port).
    pub upgrade_socket: Option<std::path::PathBuf>,
}

impl ServerSection {
    fn dns_refresh(&self, errs: &mut Vec<ConfigError>) -> std::time::Duration {
        if (1.0..=3600.0).contains(&self.dns_refresh_secs) {
            return std::time::Duration::from_secs_f64(self.dns_refresh_secs);
        }
        errs.push(err(
            "server.dns_refresh_secs",
            "must be between 1 and 3600 seconds",
        ));
        std::time::Duration::from_secs(30)
    }

    /// The upgrade socket's path: `off`, or a listener on any free port, has none.
    fn upgrade_socket(&self, listen: SocketAddr) -> Option<std::path::PathBuf> {
        match self.upgrade_socket.as_str() {
            "off" => None,
            "" if listen.port() == 0 => None,
            "" => Some(std::env::temp_dir().join(format!("tollgate-{}.upgrade", listen.port()))),
            path => Some(path.into()),
        }
    }

    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Server {
        let listen = self.listen.parse::<SocketAddr>().unwrap_or_else(|_| {
            errs.push(err(
                "server.listen",
                "must be an address like 127.0.0.1:8080",
            ));
            SocketAddr::from(([127, 0, 0, 1], 0))
        });
        let metrics_listen = if self.metrics_listen.is_empty() {
            None
        } else {
            match self.metrics_listen.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    errs.push(err("server.metrics_listen", "must be an address or empty"));
                    None
                }
            }
        };
        if self.max_body_bytes < 1024 {
            errs.push(err("server.max_body_bytes", "must be at least 1024"));
        }
        if self.threads == 0 {
            errs.push(err("server.threads", "must be at least 1"));
        }
        let mut trusted_proxies = Vec::new();
        for (i, c) in self.trusted_proxies.iter().enumerate() {
            match Cidr::parse(c) {
                Some(c) => trusted_proxies.push(c),
                None => errs.push(err(
                    format!("server.trusted_proxies[{i}]"),
                    "must be an IP or CIDR like 10.0.0.0/8",
                )),
            }
        }
        let admin_token = std::env::var(&self.admin_token_env)
            .ok()
            .filter(|t| !t.is_empty());
        if admin_token
            .as_ref()
            .is_some_and(|t| t.chars().count() < MIN_ADMIN_TOKEN_CHARS)
        {
            errs.push(err(
                "server.admin_token_env",
                format!(
                    "the token in ${} must be at least 32 characters (or unset, to disable the admin API)",
                    self.admin_token_env
                ),
            ));
        }
        let mut admin_emails = Vec::new();
        for (i, e) in self.admin_emails.iter().enumerate() {
            let e = e.trim().to_lowercase();
            if !e.contains('@') {
                errs.push(err(
                    format!("server.admin_emails[{i}]"),
                    "must be an e-mail address",
                ));
            }
            admin_emails.push(e);
        }
        let log_format = match self.log_format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => {
                errs.push(err("server.log_format", "must be \"text\" or \"json\""));
                LogFormat::Text
            }
        };
        let dns_refresh = self.dns_refresh(errs);
        Server {
            listen,
            metrics_listen,
            public_url: self.public_url.clone(),
            admin_token_digest: admin_token.map(|t| tollgate_filters::keys::hash(&t)),
            trusted_proxies,
            max_body_bytes: self.max_body_bytes,
            threads: self.threads,
            graceful_shutdown_secs: self.graceful_shutdown_secs,
            max_connections: (self.max_connections > 0).then_some(self.max_connections),
            admin_emails,
            log_format,
            dns_refresh,
            upgrade_socket: self.upgrade_socket(listen),
        }
    }
}
