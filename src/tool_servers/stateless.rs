//! Finding out which era a tool server speaks, before the first request to it: `server/discover`
//! in the 2026-07-28 envelope first; a server that lists that version is spoken to statelessly
//! (no `initialize`, no session: the version and the gateway as a client in every request's
//! `_meta`); any other answer (an error, a refusal, a 2025 server asking for its session) means
//! an older server, opened with `initialize`. What was found is kept per server
//! (`cache.rs`) and found out again when a stateless server stops answering in that era.
//!
//! A server that keeps 2025 sessions too (its `initialize` issues an `Mcp-Session-Id`) is
//! spoken to in the agent's era: statelessly for a 2026 agent, in a 2025 session for a 2025
//! one (kept beside the finding), so that it can ask that agent on the call's stream
//! (sampling, elicitation), serve the methods the 2026 era removed (`logging/setLevel`,
//! `resources/subscribe`) and answer in 2025 shapes. One that answers `initialize` without a
//! session has no stream to ask on in 2025 (its input requests are bridged in 2026 instead,
//! `mcp::inputs`), and one that refuses it speaks only 2026: both stay stateless for everyone.

use serde_json::Value;
use tollgate_filters::mcp::{era, request_json};

use super::cache::{legacy_key, UpstreamSession};
use super::client::{Failure, Routing, Upstream};

impl Upstream<'_> {
    /// The server's era, found out and kept: a stateless session, or an `initialize`d one.
    pub async fn open(&self) -> Result<UpstreamSession, Failure> {
        let mut stateless = UpstreamSession {
            version: era::STATELESS.to_owned(),
            ..UpstreamSession::default()
        };
        let params = era::with_meta(None, env!("CARGO_PKG_VERSION")).unwrap_or_default();
        let msg = request_json(Some(0), "server/discover", Some(&params));
        let routing = Routing {
            method: "server/discover",
            name: None,
        };
        let a = self
            .post(&msg, Some(0), Some(&stateless), Some(&routing))
            .await?;
        let found = match (a.status, &a.message) {
            (200, Some(m)) => m.result_tree(),
            _ => Value::Null,
        };
        let speaks = found["supportedVersions"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == era::STATELESS));
        if !speaks {
            return self.initialize(&self.key).await;
        }
        // Whether it keeps 2025 sessions too is asked when a 2025 agent comes
        // (`Upstream::session`): its discover lists the stateless era's versions only.
        stateless.capabilities = found["capabilities"].clone();
        self.shared.mcp.set_session(&self.key, stateless.clone());
        Ok(stateless)
    }

    /// The session this request goes in, and the key it is kept under: the server's finding
    /// ([`Upstream::open`] when there is none), or for a 2025 agent and a server of both eras,
    /// the 2025 session beside it (`initialize`d when there is none; a stateless server not
    /// known to keep 2025 sessions is asked so once, and what it answers kept with the finding).
    pub(super) async fn session(&self) -> Result<(String, UpstreamSession), Failure> {
        let mut found = match self.shared.mcp.session(&self.key) {
            Some(s) => s,
            None => Box::pin(self.open()).await?,
        };
        let main = self.key.clone();
        if !self.legacy || found.version != era::STATELESS || found.also_2025 == Some(false) {
            return Ok((main, found));
        }
        let key = legacy_key(&self.key);
        if let Some(s) = self.shared.mcp.session(&key) {
            return Ok((key, s));
        }
        match Box::pin(self.handshake()).await {
            Ok(Some(s)) if s.id.is_some() => {
                self.shared.mcp.set_session(&key, s.clone());
                found.also_2025 = Some(true);
                self.shared.mcp.set_session(&main, found);
                Ok((key, s))
            }
            // No session (no stream to ask the agent on), or the handshake refused (2026 only):
            // the 2025 agent is spoken for in 2026-07-28 too.
            Ok(_) => {
                found.also_2025 = Some(false);
                self.shared.mcp.set_session(&main, found.clone());
                Ok((main, found))
            }
            // Not known yet: this request goes statelessly, the next asks again.
            Err(f) => {
                tracing::debug!(url = %self.key, "initialize of a stateless server failed: {f}");
                Ok((main, found))
            }
        }
    }

    /// What the server declared it offers (in the agent's era), `null` when unknown.
    pub async fn capabilities(&self) -> Result<Value, Failure> {
        Ok(self.session().await?.1.capabilities)
    }
}
