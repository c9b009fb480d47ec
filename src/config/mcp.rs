//! `[mcp]`: the tool marketplace's limits (DESIGN.md, Rules: MCP), checked at load.

use std::time::Duration;

use serde::Deserialize;

use super::error::{err, secs, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSection {
    /// Highest price per call a third-party tool server may set.
    pub max_third_party_credits: u64,
    /// The developer's share of each call's price, rounded up.
    pub developer_share_percent: u64,
    /// SSRF guard: loopback, private and link-local upstreams are refused unless true.
    pub allow_private_upstreams: bool,
    /// Seconds one upstream tool call may take.
    pub call_timeout: f64,
    pub max_result_bytes: usize,
    /// Seconds between refreshes of live tool servers' tool lists.
    pub refresh_secs: f64,
    /// `Host` values the MCP endpoints answer besides the public URL's, the listen address and
    /// loopback names on its port (DNS-rebinding protection); `"*"`: any.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values they answer besides the public URL's; `"*"`: any.
    pub allowed_origins: Vec<String>,
    /// The environment variable holding the secret that seals the ids of a tool server's
    /// requests relayed to agents (`tollgate_filters::mcp::ask`); the same on every instance.
    pub relay_secret_env: String,
}

impl Default for McpSection {
    fn default() -> Self {
        McpSection {
            max_third_party_credits: 60,
            developer_share_percent: 80,
            allow_private_upstreams: false,
            call_timeout: 25.0,
            max_result_bytes: 5 * 1024 * 1024,
            refresh_secs: 600.0,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            relay_secret_env: "TOLLGATE_MCP_RELAY_SECRET".into(),
        }
    }
}

/// The shortest relay secret accepted.
const MIN_RELAY_SECRET_CHARS: usize = 32;

#[derive(Debug, Clone)]
pub struct Mcp {
    pub max_third_party_credits: u64,
    pub developer_share_percent: u64,
    pub allow_private_upstreams: bool,
    pub call_timeout: Duration,
    pub max_result_bytes: usize,
    pub refresh: Duration,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// The relay secret from `relay_secret_env`, read at load; `None`: unset, and each
    /// instance uses one it generated (answers then reach only the instance that relayed).
    pub relay_secret: Option<Vec<u8>>,
}

impl McpSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Mcp {
        if self.developer_share_percent > 100 {
            errs.push(err("mcp.developer_share_percent", "must be 0 to 100"));
        }
        if self.max_third_party_credits > 1_000_000 {
            errs.push(err(
                "mcp.max_third_party_credits",
                "must be at most 1000000",
            ));
        }
        for (key, list) in [
            ("mcp.allowed_hosts", &self.allowed_hosts),
            ("mcp.allowed_origins", &self.allowed_origins),
        ] {
            if list
                .iter()
                .any(|v| v.trim().is_empty() || v.contains(char::is_whitespace))
            {
                errs.push(err(
                    key,
                    "must hold host names (or origins) without spaces, or \"*\"",
                ));
            }
        }
        let relay_secret = std::env::var(&self.relay_secret_env)
            .ok()
            .filter(|t| !t.is_empty());
        if relay_secret
            .as_ref()
            .is_some_and(|t| t.chars().count() < MIN_RELAY_SECRET_CHARS)
        {
            errs.push(err(
                "mcp.relay_secret_env",
                format!(
                    "the secret in ${} must be at least {MIN_RELAY_SECRET_CHARS} characters (or unset)",
                    self.relay_secret_env
                ),
            ));
        }
        if self.max_result_bytes < 1024 {
            errs.push(err("mcp.max_result_bytes", "must be at least 1024"));
        }
        Mcp {
            max_third_party_credits: self.max_third_party_credits,
            developer_share_percent: self.developer_share_percent,
            allow_private_upstreams: self.allow_private_upstreams,
            call_timeout: secs("mcp.call_timeout", self.call_timeout, errs),
            max_result_bytes: self.max_result_bytes,
            refresh: secs("mcp.refresh_secs", self.refresh_secs, errs),
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            relay_secret: relay_secret.map(String::into_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_short_relay_secret_is_refused() {
        // A variable only this test sets (tests share the process environment).
        std::env::set_var("TOLLGATE_TEST_RELAY_SECRET_SHORT", "too-short");
        std::env::set_var("TOLLGATE_TEST_RELAY_SECRET_LONG", "x".repeat(32));
        let errs =
            super::super::parse("[mcp]\nrelay_secret_env = \"TOLLGATE_TEST_RELAY_SECRET_SHORT\"\n")
                .unwrap_err();
        assert!(errs
            .iter()
            .any(|e| e.to_string().contains("mcp.relay_secret_env")));
        let c =
            super::super::parse("[mcp]\nrelay_secret_env = \"TOLLGATE_TEST_RELAY_SECRET_LONG\"\n")
                .unwrap();
        assert_eq!(c.mcp.relay_secret, Some(vec![b'x'; 32]));
        let c = super::super::parse("[mcp]\nrelay_secret_env = \"TOLLGATE_TEST_RELAY_UNSET\"\n")
            .unwrap();
        assert_eq!(c.mcp.relay_secret, None);
    }
}
