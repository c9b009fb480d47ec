//! `[webhooks]`: events sent to customers' endpoints (signed, retried, in order per endpoint).

use serde::Deserialize;

use super::error::ConfigError;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksSection {
    /// Endpoints on private, loopback or link-local addresses are allowed (server-side request
    /// forgery guard off: tests and private deployments only).
    pub allow_private_targets: bool,
}

/// The validated `[webhooks]`.
#[derive(Debug, Clone)]
pub struct Webhooks {
    pub allow_private_targets: bool,
}

impl WebhooksSection {
    pub(super) fn validate(&self, _errs: &mut Vec<ConfigError>) -> Webhooks {
        Webhooks {
            allow_private_targets: self.allow_private_targets,
        }
    }
}
