//! Payloads captured while a request runs, only for a key whose payload logging is on (its
//! own, or its wallet's): the body the client sent, as read by its front door; a JSON reply's
//! body as written; a stream's text as delivered (content and tool-call arguments, in order,
//! every leg of a resumed stream). Each is a bounded copy (`request::payloads`); redaction
//! and the cap are the writer's, off the request path.

use crate::auth::caller::Caller;
use crate::config::Config;
use crate::request::ctx::RequestCtx;
use crate::request::payloads::Payloads;

/// The client's body, read by a front door: kept when `caller`'s key logs payloads.
pub fn request(ctx: &mut RequestCtx, caller: &Caller, config: &Config, raw: &[u8]) {
    let log = &config.telemetry.request_log;
    let Caller::Key(key) = caller else { return };
    if !key.log_payloads || !log.enabled {
        return;
    }
    let mut p = Payloads::new(log.max_payload_bytes);
    (p.request, p.request_len) = p.keep(raw);
    ctx.payloads = Some(Box::new(p));
}

/// A JSON reply's body, as the client gets it.
pub fn reply(ctx: &mut RequestCtx, body: &[u8]) {
    if let Some(p) = ctx.payloads.as_deref_mut() {
        (p.response, p.response_len) = p.keep(body);
    }
}

/// A stream's delivered text: what earlier legs of a resumed stream delivered (`partial`),
/// then the last leg's.
pub fn streamed(ctx: &mut RequestCtx, partial: Option<&str>, text: &str) {
    if let Some(p) = ctx.payloads.as_deref_mut() {
        match partial {
            Some(before) if !before.is_empty() => {
                (p.response, p.response_len) = p.keep([before, text].concat().as_bytes())
            }
            _ => (p.response, p.response_len) = p.keep(text.as_bytes()),
        }
    }
}
