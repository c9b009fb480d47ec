//! A tool server's messages during a `tools/call`, relayed to the agent: its progress and log
//! notifications when the agent takes an event stream (`text/event-stream` in its `Accept`, as
//! the Streamable HTTP transport asks of every client; a server sends progress only for a
//! `progressToken` the agent put in the call's `_meta`), its requests to the client
//! (sampling, elicitation, roots, ping) when the answer may be an event stream and the client
//! is of the 2025 era, each with a sealed id ([`asks`](super::asks)). The answer becomes an event stream, opened at the
//! first message, each an event as the server sent it (but for a request's id), and the call's
//! response the last event. An agent whose call had none gets its one JSON reply as before.
//! The charge does not change: the call is settled when its response is known, before the
//! last event.

use std::future::Future;

use crate::request::Session;
use bytes::Bytes;
use tokio::sync::mpsc::UnboundedReceiver;

use super::asks::Sealer;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::tool_servers::reply::Relayed;

/// What the agent's answer can carry: `None`, nothing (it takes no event stream); else its
/// notifications (always, to an agent that takes a stream: log messages need no token, and the
/// conformance suite's logging scenario sends none) and whether the server's requests may be
/// relayed too (a 2026-07-28 client is asked for input with results, not requests).
pub fn wanted(session: &Session, is_2026: bool) -> Option<bool> {
    let sse = session
        .req_header()
        .headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    sse.then_some(!is_2026)
}

/// Runs `call`, writing each notification that arrives meanwhile to the agent as an event
/// (the stream opened at the first, unless `opened` already); returns the call's outcome and
/// whether the stream is open (then the response must go out with [`finish`]).
pub async fn drive<T>(
    session: &mut Session,
    ctx: &RequestCtx,
    call: impl Future<Output = T>,
    notes: &mut UnboundedReceiver<Relayed>,
    sealer: &Sealer,
    mut opened: bool,
) -> (T, bool) {
    tokio::pin!(call);
    let out = loop {
        tokio::select! {
            out = &mut call => break out,
            Some(m) = notes.recv() => opened = relay(session, ctx, m, sealer, opened).await,
        }
    };
    // What arrived with the response, in order, before it.
    while let Ok(m) = notes.try_recv() {
        opened = relay(session, ctx, m, sealer, opened).await;
    }
    (out, opened)
}

async fn relay(
    session: &mut Session,
    ctx: &RequestCtx,
    m: Relayed,
    sealer: &Sealer,
    opened: bool,
) -> bool {
    match m {
        Relayed::Note(note) => event(session, ctx, &note, opened).await,
        Relayed::Ask(a) => match sealer.seal(&a) {
            Some(request) => event(session, ctx, &request, opened).await,
            // Not an object: not a request the agent could answer.
            None => opened,
        },
    }
}

/// Writes one event, opening the stream first when it is not; true once opened.
pub async fn event(session: &mut Session, ctx: &RequestCtx, data: &[u8], opened: bool) -> bool {
    if !opened {
        let Some(mut h) = respond::header(200, ctx, &[]) else {
            return false;
        };
        let _ = h.insert_header("Content-Type", "text/event-stream");
        let _ = h.insert_header("Cache-Control", "no-cache");
        let _ = h.insert_header("X-Accel-Buffering", "no");
        if !session.is_http2() {
            let _ = h.insert_header("Transfer-Encoding", "chunked");
        }
        if session.write_response_header(Box::new(h)).await.is_err() {
            return false;
        }
    }
    let mut e = Vec::with_capacity(data.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend_from_slice(data);
    e.extend_from_slice(b"\n\n");
    // A client gone mid-call still has the call settled; its events are dropped.
    let _ = session.write_response_body(Bytes::from(e), false).await;
    true
}

/// The call's response as the stream's last event, and the end of the stream.
pub async fn finish(session: &mut Session, message: &[u8]) {
    let mut e = Vec::with_capacity(message.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend_from_slice(message);
    e.extend_from_slice(b"\n\n");
    let _ = session.write_response_body(Bytes::from(e), true).await;
}
