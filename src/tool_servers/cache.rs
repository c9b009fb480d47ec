//! What one instance keeps of the marketplace between requests, all of it a cache that any
//! instance can rebuild: the live services (re-read from the ledger after a short time, so an
//! approval or suspension anywhere applies everywhere within [`LIVE_TTL`]), and the gateway's
//! own MCP sessions with upstream tool servers (re-initialised when an upstream forgets one).
//! Agents' sessions are not kept at all: the `/mcp` endpoint issues none. Two things are not a
//! cache: the relay secret an instance made up when none is configured, and the calls waiting
//! here for a 2025 agent's answer to a 2026 server's input request (an answer that reaches
//! another instance comes through Redis, `mcp::asks`; without Redis it must reach this one).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::ledger::mcp::Service;

/// How long the live-service list is served from memory.
pub const LIVE_TTL: Duration = Duration::from_secs(2);

/// How long a tool server's resolved address is reused. Without it every call waited for a
/// DNS lookup on tokio's blocking pool (the system resolver caches nothing); an address that
/// moves is picked up within this time, as a load balancer's DNS refresh would.
pub const RESOLVED_TTL: Duration = Duration::from_secs(10);

/// The gateway's session with one upstream tool server, and what it found out opening it.
#[derive(Debug, Clone, Default)]
pub struct UpstreamSession {
    /// `Mcp-Session-Id`, when the server issued one.
    pub id: Option<String>,
    /// The protocol version the server answered `initialize` with (2026-07-28: stateless).
    pub version: String,
    /// Whether a stateless server also keeps 2025 sessions (`None`: not known yet): found at
    /// a 2025 agent's first request by `initialize` (its `server/discover` lists only
    /// 2026-07-28, as the 2.x SDK's does). Then that agent's requests go to it in a session of
    /// that era (`legacy_key`), where it can ask the agent on the call's stream and answers as
    /// that era does.
    pub also_2025: Option<bool>,
    /// The capabilities the server declared (`server/discover` or `initialize`), `null` when
    /// it declared none: what `/mcp/{slug}` declares of it.
    pub capabilities: serde_json::Value,
}

/// Where a both-era server's 2025 session is kept, beside its stateless finding under `url`.
pub fn legacy_key(url: &str) -> String {
    // A space is no part of a URL: the key cannot be another server's.
    format!("{url} 2025")
}

#[derive(Default)]
pub struct McpCache {
    live: Mutex<Option<(Instant, Arc<Vec<Service>>)>>,
    sessions: Mutex<HashMap<String, UpstreamSession>>,
    /// `host:port` → the address it resolved to, and when.
    resolved: Mutex<HashMap<String, (Instant, SocketAddr)>>,
    /// The relay secret this instance made up when `[mcp] relay_secret_env` is unset (kept
    /// across reloads, so the ids it issued stay good).
    generated: OnceLock<[u8; 32]>,
    /// Calls waiting on this instance for an agent's answer to an input a 2026-07-28 server
    /// asked for (`mcp::inputs`), by the nonce sealed into the id the agent was sent.
    waiting: Mutex<HashMap<String, oneshot::Sender<Vec<u8>>>>,
}

impl McpCache {
    /// The live services, if read less than [`LIVE_TTL`] ago.
    pub fn live(&self) -> Option<Arc<Vec<Service>>> {
        let g = self.live.lock().ok()?;
        g.as_ref()
            .filter(|(at, _)| at.elapsed() < LIVE_TTL)
            .map(|(_, v)| v.clone())
    }

    pub fn set_live(&self, services: Arc<Vec<Service>>) {
        if let Ok(mut g) = self.live.lock() {
            *g = Some((Instant::now(), services));
        }
    }

    /// Forgets the live services (a state change on this instance shows at once here).
    pub fn invalidate(&self) {
        if let Ok(mut g) = self.live.lock() {
            *g = None;
        }
    }

    pub fn session(&self, url: &str) -> Option<UpstreamSession> {
        self.sessions.lock().ok()?.get(url).cloned()
    }

    pub fn set_session(&self, url: &str, s: UpstreamSession) {
        if let Ok(mut g) = self.sessions.lock() {
            // Bounded: one entry per upstream URL, and a marketplace's URLs are few.
            if g.len() > 10_000 {
                g.clear();
            }
            g.insert(url.to_owned(), s);
        }
    }

    /// The address `host_port` resolved to less than [`RESOLVED_TTL`] ago.
    pub fn resolved(&self, host_port: &str) -> Option<SocketAddr> {
        let g = self.resolved.lock().ok()?;
        g.get(host_port)
            .filter(|(at, _)| at.elapsed() < RESOLVED_TTL)
            .map(|(_, a)| *a)
    }

    pub fn set_resolved(&self, host_port: &str, addr: SocketAddr) {
        if let Ok(mut g) = self.resolved.lock() {
            // Bounded as the sessions are: a marketplace's hosts are few.
            if g.len() > 10_000 {
                g.clear();
            }
            g.insert(host_port.to_owned(), (Instant::now(), addr));
        }
    }

    /// This instance's own relay secret, made up at first use.
    pub fn generated_secret(&self) -> [u8; 32] {
        *self.generated.get_or_init(|| {
            tracing::warn!("no MCP relay secret is set ([mcp] relay_secret_env): this instance made one up, so agents' answers to tool servers' requests reach tool servers only through this instance; set the same secret on every instance");
            rand::random()
        })
    }

    /// Waits for the answer sealed with `nonce` ([`McpCache::answered`]); forget it with
    /// [`McpCache::unwait`] when the wait is over, answered or not.
    pub fn wait_for(&self, nonce: &str) -> oneshot::Receiver<Vec<u8>> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut g) = self.waiting.lock() {
            g.insert(nonce.to_owned(), tx);
        }
        rx
    }

    /// Hands an agent's answer to the call waiting for it here; false when none is (the call
    /// is on another instance, or over).
    pub fn answered(&self, nonce: &str, message: Vec<u8>) -> bool {
        let tx = self.waiting.lock().ok().and_then(|mut g| g.remove(nonce));
        tx.is_some_and(|tx| tx.send(message).is_ok())
    }

    pub fn unwait(&self, nonce: &str) {
        if let Ok(mut g) = self.waiting.lock() {
            g.remove(nonce);
        }
    }

    pub fn drop_session(&self, url: &str) {
        if let Ok(mut g) = self.sessions.lock() {
            g.remove(url);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolved_address_is_reused_per_host_and_port() {
        let c = McpCache::default();
        let a: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        assert_eq!(c.resolved("tools.example:9000"), None);
        c.set_resolved("tools.example:9000", a);
        assert_eq!(c.resolved("tools.example:9000"), Some(a));
        assert_eq!(c.resolved("tools.example:9001"), None);
    }
}
