//! # tollgate-filters
//!
//! The request pipeline's logic with no I/O: nothing here opens a socket, reads a file or
//! depends on Pingora, sqlx or redis, so every rule can be unit-tested and benched alone.
//!
//! # Layout
//! - [`error`]: the one error type of the gateway and its mapping to HTTP status and
//!   `{"error":{…}}` JSON. Every error a client sees is built here.
//! - [`openai`]: the OpenAI wire format. [`openai::request`] checks a chat-completions body
//!   against SPEC.md's request table and rewrites it for an upstream (model name,
//!   `stream_options`, `max_tokens`); [`openai::stream`] rewrites an upstream SSE stream per
//!   chunk for the client (model name, usage chunk kept or stripped, final chunk shape) and
//!   captures usage; [`openai::completion`] does the same for a whole reply.
//! - [`sse`]: the incremental Server-Sent Events decoder (events split at any byte, bounded buffer).
//! - [`tokens`]: the BPE tokenizer fallback when an upstream reports no usage.
//! - [`route`]: the model catalog (pinned ids, aliases, tiers, deprecation) and route planning
//!   over a health snapshot.
//! - [`net`]: CIDRs of trusted proxies and the client IP behind them.
//! - [`time`]: civil dates for the config and HTTP date headers.
#![forbid(unsafe_code)]

pub mod credits;
pub mod error;
pub mod keys;
pub mod net;
pub mod openai;
pub mod ratelimit;
pub mod route;
pub mod sse;
pub mod time;
pub mod tokens;

pub use error::{ErrorKind, GatewayError};

/// Token counts of one completion, as OpenAI's `usage` object reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total(),
        })
    }

    /// [`Usage::from_json`] over the raw text of the value, without building a tree.
    pub fn from_raw(raw: &str) -> Option<Usage> {
        #[derive(serde::Deserialize)]
        struct Counts {
            prompt_tokens: u64,
            completion_tokens: u64,
        }
        let c: Counts = serde_json::from_str(raw).ok()?;
        Some(Usage {
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
        })
    }

    /// Reads an OpenAI `usage` object; `None` when it is absent, null or malformed.
    pub fn from_json(v: &serde_json::Value) -> Option<Usage> {
        let o = v.as_object()?;
        Some(Usage {
            prompt_tokens: o.get("prompt_tokens")?.as_u64()?,
            completion_tokens: o.get("completion_tokens")?.as_u64()?,
        })
    }
}
