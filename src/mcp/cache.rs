//! What one instance keeps of the marketplace between requests, all of it a cache that any
//! instance can rebuild: the live services (re-read from the ledger after a short time, so an
//! approval or suspension anywhere applies everywhere within [`LIVE_TTL`]), and the gateway's
//! own MCP sessions with upstream tool servers (re-initialised when an upstream forgets one).
//! Agents' sessions are not kept at all: the `/mcp` endpoint issues none.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ledger::mcp::Service;

/// How long the live-service list is served from memory.
pub const LIVE_TTL: Duration = Duration::from_secs(2);

/// The gateway's session with one upstream tool server.
#[derive(Debug, Clone)]
pub struct UpstreamSession {
    /// `Mcp-Session-Id`, when the server issued one.
    pub id: Option<String>,
    /// The protocol version the server answered `initialize` with.
    pub version: String,
}

#[derive(Default)]
pub struct McpCache {
    live: Mutex<Option<(Instant, Arc<Vec<Service>>)>>,
    sessions: Mutex<HashMap<String, UpstreamSession>>,
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

    pub fn drop_session(&self, url: &str) {
        if let Ok(mut g) = self.sessions.lock() {
            g.remove(url);
        }
    }
}
