//! # tollgate-filters
//!
//! The request pipeline's logic with no I/O: nothing here opens a socket, reads a file or
//! depends on Pingora, sqlx or redis, so every rule can be unit-tested and benched alone.
//!
//! # Layout
//! In the order a chat request meets them:
//! - [`net`]: CIDRs of trusted proxies and the client IP behind them (a guest's identity).
//! - [`keys`]: API key format, hashing and constant-time comparison.
//! - [`ratelimit`]: a plan's limits as windows, the sliding-log check across them, and the
//!   reset time as the `X-RateLimit-Reset-Requests` header writes it.
//! - [`openai`]: the OpenAI chat-completions wire format:
//!   - [`openai::request`] checks a chat-completions body against SPEC.md's request table and
//!     rewrites it for an upstream (model name, `stream_options`, `max_tokens`), reading the
//!     body in place through [`json::raw`] (no JSON tree) and splicing the rewrite;
//!   - [`openai::stream`] rewrites an upstream SSE stream per event for the client (model name,
//!     usage chunk kept or stripped, final chunk shape) and captures usage;
//!   - [`openai::completion`] does the same for a whole reply; both copy bytes through one
//!     member splicer (`json/splice.rs`).
//! - [`json`]: JSON read where it lies (members as slices of the body) and bodies spliced from
//!   those slices, for every wire format.
//! - [`anthropic`]: Anthropic's Messages API both ways: an OpenAI request translated for a
//!   Claude provider and its reply translated back, and a `/v1/messages` request validated and
//!   mirrored into OpenAI form for the pipeline.
//! - [`gemini`]: Google's Gemini API in front: its request written as the internal chat
//!   request, chat replies and chunks written back as Gemini responses, Google's error shape.
//! - [`responses`]: OpenAI's Responses API in front: its request written as the internal chat
//!   request, chat replies and chunks written back as response objects and typed events.
//! - [`route`]: the model catalog (pinned ids, aliases, tiers, deprecation) and the ordered
//!   route candidates over a health snapshot.
//! - [`sticky`]: sticky routing's conversation key (a session id, or a hash of the prompt's
//!   beginning, within one wallet) and the hour-long prompt cache a request may ask for.
//! - [`credits`]: integer micro-credit arithmetic: the hold's size before forwarding, the cost
//!   at settlement, priced by part (input, output, cache reads and writes).
//! - [`cost`]: what a settled request cost, as its reply tells the client (`usage.cost`,
//!   `usage.cost_details`), spliced into a JSON reply's usage object or an event's.
//! - [`budget`]: a key's budget period (day, week, month, lifetime) in UTC.
//! - [`sse`]: the incremental Server-Sent Events decoder (events split at any byte, bounded
//!   buffer) that feeds a stream translator.
//! - [`translator`]: what the stream relay asks of a translator
//!   ([`translator::StreamTranslator`]),
//!   implemented by [`openai::stream`] and [`anthropic::stream`].
//! - [`resume`]: streams that survive a cut: the seam that writes a later provider's leg as
//!   the rest of the client's stream, the opt-in and the continuation request.
//! - [`tokens`]: the BPE tokenizer fallback when an upstream reports no usage.
//! - [`error`]: the one error type of the gateway and its mapping to HTTP status and
//!   `{"error":{…}}` JSON. Every error a client sees is built here.
//! - [`time`]: civil dates for the config and HTTP date headers (`Sunset`).
//!
//! Beside the chat path:
//! - [`changelog`]: the model changelog (scheduled alias changes, deprecations and
//!   retirements) as dated entries, and the notice an alias change needs.
//! - [`mcp`]: the tool marketplace's pure parts: JSON-RPC messages, `{slug}__{tool}` names,
//!   tool definitions and call results as the live check and billing judge them, the
//!   developer's share, and the addresses a tool server may not have.
//! - [`oidc`]: organizations' single sign-on: OpenID discovery, JWKS, ID tokens, PKCE, domains.
//! - [`redact`]: what a stored request-log payload never holds (API keys, provider keys), and
//!   its cap in bytes; [`request_query`]: a request-log listing's query, checked.
//! - [`trace`]: W3C Trace Context read from clients and passed upstream, the ratio sampler,
//!   and spans encoded for an OTLP/HTTP collector (protobuf, by hand, with property tests).
//! - [`stripe`]: the webhook signature check (the clock passed in), the form encoding of API
//!   requests, and the event fields the webhook reads.
//! - [`webhook`]: events sent to customers: their names, the signature of each delivery and
//!   its check, the retry schedule, the budget percentages a charge crosses.
#![forbid(unsafe_code)]

pub mod anthropic;
pub mod budget;
pub mod changelog;
pub mod cost;
pub mod credits;
pub mod error;
pub mod gemini;
pub mod json;
pub mod keys;
pub mod mcp;
pub mod net;
pub mod oidc;
pub mod openai;
pub mod ratelimit;
pub mod redact;
pub mod request_query;
pub mod responses;
pub mod resume;
pub mod route;
pub mod sse;
pub mod sticky;
pub mod stripe;
pub mod time;
pub mod tokens;
pub mod trace;
pub mod translator;
pub mod webhook;

pub use error::{ErrorKind, GatewayError};

/// Token counts of one completion, as OpenAI's `usage` object reports them. The cache counts
/// (Anthropic's prompt caching, OpenAI's cached input) are parts of `prompt_tokens`, billed at
/// the model's cache rates when it has them; reasoning is part of `completion_tokens`, billed
/// as output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`: read from the provider's prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    pub cache_read_tokens: u64,
    /// Of `prompt_tokens`: written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`: written for an hour (Anthropic's `ttl: "1h"`); the rest for
    /// five minutes.
    pub cache_write_1h_tokens: u64,
    /// Of `completion_tokens`: reasoning (OpenAI's `completion_tokens_details`), shown, not
    /// priced apart.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Every count at most `u32::MAX`: no model reads or writes four billion tokens in one
    /// request, so a count above that (only a hostile upstream sends one) is taken as that,
    /// as the usage row stores it, and a cost computed from it cannot overflow.
    pub fn saturated(self) -> Usage {
        let c = |n: u64| n.min(u64::from(u32::MAX));
        Usage {
            prompt_tokens: c(self.prompt_tokens),
            completion_tokens: c(self.completion_tokens),
            cache_read_tokens: c(self.cache_read_tokens),
            cache_write_tokens: c(self.cache_write_tokens),
            cache_write_1h_tokens: c(self.cache_write_1h_tokens),
            reasoning_tokens: c(self.reasoning_tokens),
        }
    }

    /// Saturates: an upstream's counts are not trusted to be sane.
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total(),
        })
    }

    /// [`Usage::to_json`] as JSON text, written directly (members in the order the tree writes
    /// them).
    pub fn json_text(self) -> String {
        format!(
            r#"{{"completion_tokens":{},"prompt_tokens":{},"total_tokens":{}}}"#,
            self.completion_tokens,
            self.prompt_tokens,
            self.total()
        )
    }

    /// [`Usage::from_json`] over the raw text of the value, without building a tree.
    pub fn from_raw(raw: &str) -> Option<Usage> {
        #[derive(serde::Deserialize)]
        struct Counts<'a> {
            prompt_tokens: u64,
            completion_tokens: u64,
            #[serde(borrow, default)]
            prompt_tokens_details: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow, default)]
            completion_tokens_details: Option<&'a serde_json::value::RawValue>,
        }
        let c: Counts<'_> = serde_json::from_str(raw).ok()?;
        // The details are read leniently: a provider's odd details never lose the counts.
        let detail = |d: Option<&serde_json::value::RawValue>, key: &str| {
            d.and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
                .and_then(|d| d.get(key).and_then(serde_json::Value::as_u64))
                .unwrap_or(0)
        };
        Some(Usage {
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            cache_read_tokens: detail(c.prompt_tokens_details, "cached_tokens"),
            reasoning_tokens: detail(c.completion_tokens_details, "reasoning_tokens"),
            ..Usage::default()
        })
    }

    /// Reads an OpenAI `usage` object; `None` when it is absent, null or malformed. The cached
    /// part of the prompt (`prompt_tokens_details.cached_tokens`) and the reasoning part of the
    /// completion (`completion_tokens_details.reasoning_tokens`) are read when present.
    pub fn from_json(v: &serde_json::Value) -> Option<Usage> {
        let o = v.as_object()?;
        let detail = |path: &str| v.pointer(path).and_then(serde_json::Value::as_u64);
        Some(Usage {
            prompt_tokens: o.get("prompt_tokens")?.as_u64()?,
            completion_tokens: o.get("completion_tokens")?.as_u64()?,
            cache_read_tokens: detail("/prompt_tokens_details/cached_tokens").unwrap_or(0),
            reasoning_tokens: detail("/completion_tokens_details/reasoning_tokens").unwrap_or(0),
            ..Usage::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_text_is_what_the_tree_writes() {
        for (p, c) in [(0, 0), (12, 345), (u64::MAX, 7)] {
            let u = Usage {
                prompt_tokens: p,
                completion_tokens: c,
                ..Usage::default()
            };
            assert_eq!(u.json_text(), u.to_json().to_string());
        }
    }

    #[test]
    fn openais_cached_and_reasoning_details_are_read_leniently() {
        let text = r#"{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
            "prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
            "completion_tokens_details":{"reasoning_tokens":192,"accepted_prediction_tokens":0}}"#;
        let u = Usage::from_raw(text).unwrap();
        assert_eq!((u.cache_read_tokens, u.reasoning_tokens), (1920, 192));
        assert_eq!(
            Usage::from_json(&serde_json::from_str(text).unwrap()),
            Some(u)
        );
        // Null or odd details lose nothing but themselves.
        for details in [
            r#"null"#,
            r#"{"cached_tokens":null}"#,
            r#"{"cached_tokens":"x"}"#,
            "[1]",
        ] {
            let text = format!(
                r#"{{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{details}}}"#
            );
            let u = Usage::from_raw(&text).unwrap();
            assert_eq!((u.prompt_tokens, u.cache_read_tokens), (5, 0), "{details}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(Usage::from_json(&v), Some(u), "{details}");
        }
    }

    #[test]
    fn absurd_usage_counts_saturate_instead_of_overflowing() {
        let u = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: u64::MAX,
            ..Usage::default()
        };
        assert_eq!(u.total(), u64::MAX);
        assert_eq!(u.to_json()["total_tokens"], u64::MAX);
    }
}

/// The tour cannot drift: every `pub mod` of this crate is named in its doc as an intra-doc
/// link.
#[cfg(test)]
mod tour_tests {
    #[test]
    fn the_crate_tour_names_every_module() {
        let source = include_str!("lib.rs");
        let doc: String = source
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let missing: Vec<&str> = source
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
            .filter(|name| !doc.contains(&format!("[`{name}`]")))
            .collect();
        assert!(
            missing.is_empty(),
            "filters/src/lib.rs's tour does not name {missing:?}"
        );
    }
}
