//! The request context: per-request state from the first filter to `logging`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tollgate_filters::credits::Rates;
use tollgate_filters::Usage;

use crate::metering::{PlacedHold, Served};

/// The wire format the client speaks, which decides the shape of every answer, errors too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI's chat-completions API (and every other endpoint).
    OpenAi,
    /// Anthropic's Messages API (`/v1/messages`).
    Anthropic,
}

pub struct RequestCtx {
    pub request_id: String,
    pub wire: Wire,
    pub start: Instant,
    /// The route's label in metrics (`chat`, `models`, `api`, …).
    pub route: &'static str,
    pub status: u16,
    pub error: Option<String>,
    /// Set by the forwarding loop: what was served and what it used, for settlement.
    pub model_requested: Option<String>,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub usage: Option<Usage>,
    /// Usage came from the tokenizer, not the upstream.
    pub usage_counted: bool,
    pub client_gone: bool,
    /// Rates of the model used, for settlement.
    pub rates: Option<Rates>,
    /// The credit hold, until settled.
    pub hold: Option<PlacedHold>,
    /// What the hold decided for candidates after the first (for the usage row), `; `-joined.
    pub hold_note: Option<String>,
    /// What settlement charged.
    pub charged: Option<i64>,
    /// Headers every response of this request carries (e.g. `X-Credits-Remaining`).
    pub headers: Vec<(&'static str, String)>,
}

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(0);

/// 128 bits: 64 random per process and a 64-bit sequence, so ids never repeat across instances
/// in practice (they key `holds` and `usage`) and cost no syscall per request.
fn new_request_id() -> String {
    static PREFIX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let p = *PREFIX.get_or_init(rand::random::<u64>);
    let n = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    format!("req_{p:016x}{n:016x}")
}

impl RequestCtx {
    pub fn new() -> RequestCtx {
        RequestCtx {
            request_id: new_request_id(),
            wire: Wire::OpenAi,
            start: Instant::now(),
            route: "other",
            status: 0,
            error: None,
            model_requested: None,
            model_used: None,
            provider: None,
            usage: None,
            usage_counted: false,
            client_gone: false,
            rates: None,
            hold: None,
            hold_note: None,
            charged: None,
            headers: Vec::new(),
        }
    }

    pub fn set_header(&mut self, name: &'static str, value: String) {
        self.headers.retain(|(k, _)| *k != name);
        self.headers.push((name, value));
    }

    /// Adds one decision of the hold to the usage row's note.
    pub fn note_hold(&mut self, what: String) {
        match &mut self.hold_note {
            Some(n) => {
                n.push_str("; ");
                n.push_str(&what);
            }
            None => self.hold_note = Some(what),
        }
    }

    /// What the request turned out to be, for its usage row.
    pub fn served(&self) -> Served<'_> {
        Served {
            request_id: &self.request_id,
            model_requested: self.model_requested.as_deref().unwrap_or_default(),
            model_used: self.model_used.as_deref(),
            provider: self.provider.as_deref(),
            usage: self.usage.unwrap_or_default(),
            rates: self.rates,
            status: self.status,
            latency_ms: self.start.elapsed().as_millis() as i64,
            hold_note: self.hold_note.as_deref(),
        }
    }
}

impl Default for RequestCtx {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_carry_128_bits_and_do_not_repeat() {
        let (a, b) = (new_request_id(), new_request_id());
        assert_eq!(a.len(), "req_".len() + 32);
        assert!(a[4..].bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
