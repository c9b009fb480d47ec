//! Cache-aware (sticky) routing (docs/caching.md, "Sticky routing"): the turns of one conversation go
//! back to the endpoint and model that served its last turn while the provider still holds its
//! prompt cached, so each turn reads the conversation so far from the cache instead of paying
//! for it again, on whichever instance it arrives.
//!
//! A request's [`Turn`] is its conversation's key (`tollgate_filters::sticky`: a session id the
//! client sent, or a hash of the prompt's beginning; always within one wallet) and the
//! [`Affinity`] found for it in the [`store`]. The pipeline moves the affinity's model first
//! among the candidates ([`Turn::prefer`]) and its endpoint first among the pool's usable
//! endpoints ([`Turn::order`]); an endpoint that is ejected or unhealthy is not among those,
//! so affinity never overrides a failing endpoint (DESIGN.md, Caches). Whatever served the
//! turn is recorded ([`Turn::served`]), so after a failover the affinity follows.

pub mod store;

use std::sync::Arc;
use std::time::Duration;

use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::{Catalog, ModelSpec};
use tollgate_filters::sticky::{asks_hour_cache, conversation_key, Signal};

use crate::config::sticky::Sticky;
use crate::config::ProviderKind;
use crate::runtime::Shared;
use crate::upstream::{Endpoint, Pool};
use store::{Affinity, Outcome};

/// A prompt cache Anthropic keeps for an hour when a breakpoint asks for it (`ttl: "1h"`).
const ANTHROPIC_HOUR: Duration = Duration::from_secs(3600);
/// OpenAI's extended prompt-cache retention (`prompt_cache_retention: "24h"`).
const OPENAI_DAY: Duration = Duration::from_secs(86_400);
/// Bytes of request body per estimated prompt token, for `min_prompt_tokens`: English text
/// and JSON run near four characters per token.
const BYTES_PER_TOKEN: usize = 4;

/// One sticky request: its conversation and where that conversation was served last.
pub struct Turn {
    key: String,
    found: Option<Affinity>,
}

impl Turn {
    /// The conversation of a request of `wallet` (none for a guest: guests are not sticky), when
    /// sticky routing applies to it: on, and the request named its conversation or is large
    /// enough for a provider to cache its prompt.
    pub fn of(
        config: &Sticky,
        wallet: Option<&str>,
        req: &ChatRequest<'_>,
        signal: Signal<'_>,
    ) -> Option<Turn> {
        let wallet = wallet.filter(|_| config.enabled)?;
        let estimate = (req.raw_len / BYTES_PER_TOKEN) as u64;
        if !signal.said() && estimate < config.min_prompt_tokens {
            return None;
        }
        Some(Turn {
            key: conversation_key(wallet, &req.model, req, signal),
            found: None,
        })
    }

    /// Looks its affinity up (bounded by the counter store's timeout; none when it fails).
    pub async fn look_up(mut self, shared: &Shared) -> Turn {
        let store = shared.limiter.counters();
        self.found = shared.sticky.get(store, &self.key).await;
        self
    }

    /// Moves the affinity's model to the front of `candidates` when it is one of them; the
    /// others keep their order behind it, for failover.
    pub fn prefer(&self, catalog: &Catalog, candidates: &mut [usize]) {
        let Some(a) = &self.found else {
            return;
        };
        if let Some(at) = candidates
            .iter()
            .position(|&i| catalog.model(i).id == a.model)
        {
            candidates[..=at].rotate_right(1);
        }
    }

    /// Moves the affinity's endpoint to the front of `endpoints` (the pool's usable ones, for
    /// `model`) when it is among them.
    pub fn order(&self, model: &ModelSpec, endpoints: &mut [Arc<Endpoint>]) {
        let Some(a) = self.found.as_ref().filter(|a| a.model == model.id) else {
            return;
        };
        if let Some(at) = endpoints.iter().position(|e| is(a, e)) {
            endpoints[..=at].rotate_right(1);
        }
    }

    /// Records what served the turn as the conversation's affinity, for as long as the
    /// provider keeps the prompt cached; counts the outcome. True when the write went to a task
    /// of its own (Redis).
    pub fn served(&self, shared: &Shared, s: Served<'_>) -> bool {
        let outcome = match &self.found {
            None => Outcome::Miss,
            Some(a) if a.model == s.model.id && is(a, s.endpoint) => Outcome::Hit,
            Some(_) => Outcome::Moved,
        };
        shared.sticky.count(outcome);
        let affinity = Affinity {
            model: s.model.id.clone(),
            authority: s.endpoint.url.authority(),
            addr: s.endpoint.addr,
        };
        let ttl = cache_ttl(s.pool, s.req, s.body);
        let max = s.config.max_entries;
        let store = shared.limiter.counters();
        shared.sticky.set(store, &self.key, &affinity, ttl, max)
    }
}

/// What served a turn.
pub struct Served<'a> {
    pub config: &'a Sticky,
    pub req: &'a ChatRequest<'a>,
    pub model: &'a ModelSpec,
    pub pool: &'a Pool,
    pub endpoint: &'a Endpoint,
    /// The body the endpoint was sent.
    pub body: &'a [u8],
}

fn is(a: &Affinity, e: &Endpoint) -> bool {
    a.addr == e.addr && a.authority == e.url.authority()
}

/// How long the provider keeps this request's prompt cached: its `cache_ttl_secs`, or longer
/// when the request asked for longer (Anthropic's hour-long breakpoint, OpenAI's extended
/// retention).
fn cache_ttl(pool: &Pool, req: &ChatRequest<'_>, body: &[u8]) -> Duration {
    let p = &pool.provider;
    let asked = match p.kind.wire() {
        ProviderKind::Anthropic if asks_hour_cache(body) => ANTHROPIC_HOUR,
        ProviderKind::OpenAi
            if req
                .get("prompt_cache_retention")
                .is_some_and(|v| v.get() == "\"24h\"") =>
        {
            OPENAI_DAY
        }
        _ => Duration::ZERO,
    };
    p.cache_ttl.max(asked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_filters::openai::request::parse_chat_request;

    #[test]
    fn small_unnamed_requests_guests_and_a_switched_off_config_are_not_sticky() {
        let on = Sticky::default();
        let small = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let req = parse_chat_request(small).unwrap();
        assert!(Turn::of(&on, Some("acct"), &req, Signal::Unsaid).is_none());
        assert!(Turn::of(&on, Some("acct"), &req, Signal::Named(b"s")).is_some());
        assert!(Turn::of(&on, Some("acct"), &req, Signal::Continued).is_some());
        assert!(Turn::of(&on, None, &req, Signal::Named(b"s")).is_none());
        let off = Sticky {
            enabled: false,
            ..on
        };
        assert!(Turn::of(&off, Some("acct"), &req, Signal::Named(b"s")).is_none());
        let text = "x".repeat(4 * 1024);
        let large = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"{text}"}}]}}"#);
        let req = parse_chat_request(large.as_bytes()).unwrap();
        assert!(Turn::of(&on, Some("acct"), &req, Signal::Unsaid).is_some());
    }
}
