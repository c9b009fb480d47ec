//! Finding out which era a tool server speaks, before the first request to it: `server/discover`
//! in the 2026-07-28 envelope first; a server that lists that version is spoken to statelessly
//! (no `initialize`, no session: the version and the gateway as a client in every request's
//! `_meta`); any other answer (an error, a refusal, a 2025 server asking for its session) means
//! an older server, opened with `initialize`. What was found is kept per server
//! (`cache.rs`) and found out again when a stateless server stops answering in that era.

use tollgate_filters::mcp::{era, request_json};

use super::cache::UpstreamSession;
use super::client::{Failure, Routing, Upstream};

impl Upstream<'_> {
    /// The server's era, found out and kept: a stateless session, or an `initialize`d one.
    pub async fn open(&self) -> Result<UpstreamSession, Failure> {
        let stateless = UpstreamSession {
            id: None,
            version: era::STATELESS.to_owned(),
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
        let speaks = a.status == 200
            && a.message.as_ref().is_some_and(|m| {
                m.result_tree()["supportedVersions"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|x| x == era::STATELESS))
            });
        if !speaks {
            return self.initialize().await;
        }
        self.shared.mcp.set_session(&self.key, stateless.clone());
        Ok(stateless)
    }
}
