//! `[oauth]`: the lifetimes of what the OAuth authorization server for MCP clients issues
//! (`src/oauth`). Access tokens are short-lived; refresh tokens rotate on every use.

use serde::Deserialize;

use super::error::{err, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthSection {
    pub access_token_secs: u64,
    pub refresh_token_days: u64,
    /// How long an authorization code may wait for its exchange.
    pub code_secs: u64,
}

impl Default for OAuthSection {
    fn default() -> Self {
        OAuthSection {
            access_token_secs: 3600,
            refresh_token_days: 30,
            code_secs: 60,
        }
    }
}

/// The lifetimes in milliseconds, as the token endpoint uses them.
#[derive(Debug, Clone, Copy)]
pub struct OAuth {
    pub access_token_ms: i64,
    pub refresh_token_ms: i64,
    pub code_ms: i64,
}

impl OAuthSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> OAuth {
        let mut check = |key: &str, v: u64, lo: u64, hi: u64| {
            if !(lo..=hi).contains(&v) {
                errs.push(err(format!("oauth.{key}"), format!("must be {lo} to {hi}")));
            }
            v.clamp(lo, hi) as i64
        };
        OAuth {
            access_token_ms: check("access_token_secs", self.access_token_secs, 10, 86_400) * 1000,
            refresh_token_ms: check("refresh_token_days", self.refresh_token_days, 1, 365)
                * 86_400_000,
            code_ms: check("code_secs", self.code_secs, 10, 600) * 1000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(s: OAuthSection) -> Vec<String> {
        let mut errs = Vec::new();
        s.validate(&mut errs);
        errs.into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn lifetimes_out_of_range_are_refused_with_their_key_paths() {
        let bad = OAuthSection {
            access_token_secs: 0,
            refresh_token_days: 1000,
            code_secs: 5,
        };
        assert_eq!(
            paths(bad),
            [
                "oauth.access_token_secs",
                "oauth.refresh_token_days",
                "oauth.code_secs"
            ]
        );
        assert!(paths(OAuthSection::default()).is_empty());
        let text = "[oauth]\naccess_token_secs = 60\nrefresh_token_days = 7\n";
        let c = crate::config::parse(text).map_err(|e| format!("{e:?}"));
        assert_eq!(c.map(|c| c.oauth.access_token_ms), Ok(60_000));
        assert!(crate::config::parse("[oauth]\nnope = 1\n").is_err());
    }
}
