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

/// What a request says of resuming a cut stream (docs/api.md, "Streams that survive a cut"): the
/// `X-Tollgate-Resume` header, else the body's `tollgate.resume`; and the body without its
/// `tollgate` extension, when it had one (no provider is sent it).
fn opt_in(session: &Session, raw: &[u8]) -> Result<(Option<bool>, Option<Vec<u8>>), GatewayError> {
    let header = match session.req_header().headers.get("x-tollgate-resume") {
        None => None,
        Some(v) => Some(header_value(v.to_str().unwrap_or("?"))?),
    };
    let ext = take_extension(raw)?;
    let body = ext.as_ref().and_then(|e| e.resume);
    Ok((header.or(body), ext.map(|e| e.body)))
}

/// The request body without its `tollgate` extension, and what it says of resuming.
pub fn without_extension(
    session: &Session,
    raw: bytes::BytesMut,
) -> Result<(Option<bool>, bytes::BytesMut), GatewayError> {
    let (resume, stripped) = opt_in(session, &raw)?;
    let raw = stripped.map_or(raw, |b| bytes::BytesMut::from(bytes::Bytes::from(b)));
    Ok((resume, raw))
}
