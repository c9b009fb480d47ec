//! The request context: per-request state from the first filter to `logging`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tollgate_filters::credits::Rates;
use tollgate_filters::Usage;

use crate::ledger::KeyAuth;
use crate::limits::in_flight::Slot;
use crate::metering::charge::Charge;
use crate::metering::legs::Legs;
use crate::metering::Written;
use crate::request::payloads::Payloads;
use crate::request::timeline::Timeline;
use crate::telemetry::context::TraceCtx;

/// The wire format the client speaks, which decides the shape of every answer, errors too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI's chat-completions API (and every other endpoint).
    OpenAi,
    /// Anthropic's Messages API (`/v1/messages`).
    Anthropic,
    /// Google's Gemini API (`/v1beta/…`): errors in Google's shape.
    Gemini,
}

/// The front door a request comes in by, named by its route's row: the wire format of every
/// answer (errors too) and, for a metered request, what its access-log line says it was. Each
/// door declares its own beside its handler (`crate::fronts`, `crate::mcp::endpoint`); the
/// gateway's own API is [`OWN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Door {
    /// Its name in the access-log line (`door`).
    pub name: &'static str,
    /// The wire format of its answers, errors included.
    pub wire: Wire,
    /// What a metered request of this door is, in its access-log line.
    pub what: &'static str,
}

/// The gateway's own API, pages and probes (errors in OpenAI's shape).
pub const OWN: Door = Door {
    name: "own",
    wire: Wire::OpenAi,
    what: "request",
};

/// What served a request, and what it used: the usage row's facts.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub model: String,
    pub provider: String,
    /// The rates of the model used.
    pub rates: Rates,
    pub usage: Usage,
    /// The usage came from the tokenizer, not the upstream.
    pub usage_counted: bool,
}

pub struct RequestCtx {
    pub request_id: String,
    pub wire: Wire,
    /// The door of a metered request, set when it is admitted as one (by the route table for
    /// a row with a door and a plan's limit; by the MCP endpoint for each `tools/call`): it
    /// gets an access-log line.
    pub metered_by: Option<Door>,
    pub start: Instant,
    /// The route's label in metrics (`chat`, `models`, `api`, …).
    pub route: &'static str,
    pub status: u16,
    pub error: Option<String>,
    /// The model the client asked for.
    pub model_requested: Option<String>,
    pub client_gone: bool,
    /// The metered request: its charge (the credit hold), until it is settled, once.
    pub metered: Option<Charge>,
    /// What was served: set by the attempt that served the request.
    pub served: Option<Delivery>,
    /// A resumed stream's legs, each charged at its model's rates (`served` is the last).
    pub resumed: Option<Legs>,
    /// What the settlement wrote (into the ledger, or into a credit lease whose next round
    /// commits it).
    pub charged: Option<Written>,
    /// Headers every response of this request carries (e.g. `X-Credits-Remaining`).
    pub headers: Vec<(&'static str, String)>,
    /// Its slot under a `concurrent_requests` limit: given back when the context is dropped,
    /// at the end of the request whichever way it ends.
    pub slot: Option<Slot>,
    /// When its upstream legs, first output and settlement happened.
    pub timeline: Timeline,
    /// The API key that called, once its handler has run (boxed: most of the context's
    /// readers never look at it).
    pub key: Option<Box<KeyAuth>>,
    /// Its request and response bodies, captured only where payload logging is on (boxed:
    /// most requests have none).
    pub payloads: Option<Box<Payloads>>,
    /// Its place in a trace: the client's or one started here (`telemetry::context`).
    pub trace: TraceCtx,
    /// Answered from the response cache: charged this many millionths of the list price of
    /// the reply it repeats.
    pub cache_hit: Option<u32>,
    /// A response cache miss whose reply is recorded to be stored (boxed: most requests have
    /// none).
    pub cache_fill: Option<Box<crate::response_cache::Fill>>,
}

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(0);

/// 128 bits: 64 random per process and a 64-bit sequence, so ids never repeat across instances
/// in practice (they key `holds` and `usage`) and cost no syscall per request.
fn new_request_id() -> String {
    static PREFIX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let p = *PREFIX.get_or_init(rand::random::<u64>);
    let n = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    // Written digit by digit: `format!`'s machinery was 1 % of a tools/call's CPU.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(36);
    id.push_str("req_");
    for v in [p, n] {
        for shift in (0..16).rev() {
            id.push(char::from(HEX[((v >> (shift * 4)) & 0xf) as usize]));
        }
    }
    id
}

impl RequestCtx {
    pub fn new() -> RequestCtx {
        RequestCtx {
            request_id: new_request_id(),
            wire: Wire::OpenAi,
            metered_by: None,
            start: Instant::now(),
            route: "other",
            status: 0,
            error: None,
            model_requested: None,
            client_gone: false,
            metered: None,
            served: None,
            resumed: None,
            charged: None,
            headers: Vec::new(),
            slot: None,
            timeline: Timeline::default(),
            key: None,
            payloads: None,
            trace: TraceCtx::default(),
            cache_hit: None,
            cache_fill: None,
        }
    }

    pub fn set_header(&mut self, name: &'static str, value: String) {
        self.headers.retain(|(k, _)| *k != name);
        self.headers.push((name, value));
    }
}

impl Default for RequestCtx {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod id_tests {
    #[test]
    fn request_ids_are_req_and_32_hex_digits_and_never_repeat() {
        let (a, b) = (super::new_request_id(), super::new_request_id());
        for id in [&a, &b] {
            assert!(id.starts_with("req_"), "{id}");
            let hex = &id[4..];
            assert_eq!(hex.len(), 32, "{id}");
            assert!(
                hex.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
                "{id}"
            );
        }
        assert_eq!(a[..20], b[..20], "one process prefix");
        // Sixteen lowercase hex digits each: text order is number order.
        assert!(b[20..] > a[20..], "{a} then {b}");
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
