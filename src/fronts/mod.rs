//! The front doors: one file (or folder) per wire format a client speaks, each reading its
//! body into the internal chat request, saying what the door adds (its
//! [`FrontDoor`](crate::pipeline::front::FrontDoor): the checks before the hold, the upstream
//! path and body per provider kind, the reply and stream translators), and handing it to the
//! one pipeline (`crate::pipeline`), whose answer it shapes:
//!
//! - [`chat_completions`]: OpenAI's chat completions, the internal request itself;
//! - [`messages`]: Anthropic's Messages API, and its `count_tokens`;
//! - [`responses`]: OpenAI's Responses API, and the stored responses it chains;
//! - [`gemini`]: Google's Gemini API (`generateContent`, `streamGenerateContent`,
//!   `countTokens`);
//! - [`completions`]: OpenAI's legacy completions;
//! - [`embeddings`]: OpenAI's embeddings (its own forwarding loop: no stream, no translation).
//!
//! The MCP tool call is the metered door of `crate::mcp::endpoint` (its charge is a
//! `metering::Charge` too). Each door declares its [`Door`](crate::request::ctx::Door) (the
//! shape of its errors, its access-log line) beside its handler. A new door is a file here
//! (its handler, its `Door`, its `FrontDoor`), its row in `proxy/table.rs`, and its
//! translation in the `filters` crate; the pipeline is not touched.

pub mod chat_completions;
pub mod completions;
pub mod embeddings;
pub mod gemini;
pub mod messages;
pub mod responses;

use tollgate_filters::resume::request::{header_value, take_extension};
use tollgate_filters::GatewayError;

use crate::request::Session;

/// What a request's headers and body extension ask of the gateway: resuming a cut stream
/// (docs/api.md, "Streams that survive a cut": `X-Tollgate-Resume`, else the body's
/// `tollgate.resume`) and the response cache (`X-Tollgate-Cache`, else `tollgate.cache`, and
/// `Cache-Control`).
pub struct OptIn {
    pub resume: Option<bool>,
    pub cache: Option<bool>,
    /// The `X-Tollgate-Cache` and `Cache-Control` headers, checked when the cache is asked of.
    headers: (Option<String>, Option<String>),
}

impl OptIn {
    /// What the request asks of the response cache, for its `body` (without its extension).
    pub fn cache<'a>(
        &self,
        body: &'a [u8],
    ) -> Result<crate::response_cache::Ask<'a>, GatewayError> {
        let (cache, control) = &self.headers;
        crate::response_cache::Ask::of(cache.as_deref(), control.as_deref(), self.cache, body)
    }
}

/// The request body without its `tollgate` extension, and what the request opts in to.
pub fn without_extension(
    session: &Session,
    raw: bytes::BytesMut,
) -> Result<(OptIn, bytes::BytesMut), GatewayError> {
    let headers = &session.req_header().headers;
    let resume = match headers.get("x-tollgate-resume") {
        None => None,
        Some(v) => Some(header_value(v.to_str().unwrap_or("?"))?),
    };
    let text = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("?").to_owned())
    };
    let ext = take_extension(&raw)?;
    let opt = OptIn {
        resume: resume.or(ext.as_ref().and_then(|e| e.resume)),
        cache: ext.as_ref().and_then(|e| e.cache),
        headers: (text("x-tollgate-cache"), text("cache-control")),
    };
    let raw = match ext {
        Some(e) => bytes::BytesMut::from(bytes::Bytes::from(e.body)),
        None => raw,
    };
    Ok((opt, raw))
}
