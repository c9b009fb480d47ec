//! A tool server's progress and log notifications during a `tools/call`, relayed to the agent
//! that asked for them (a `progressToken` in the call's `_meta`, and `text/event-stream` in its
//! `Accept`): the answer becomes an event stream, opened at the first notification, each
//! notification an event as the server sent it, and the call's response the last event. An
//! agent that did not ask, or a call with no notification, gets its one JSON reply as before.
//! The charge does not change: the call is settled when its response is known, before the
//! last event.

use std::future::Future;

use bytes::Bytes;
use pingora::proxy::Session;
use serde_json::value::RawValue;
use tokio::sync::mpsc::UnboundedReceiver;
use tollgate_filters::json::raw;

use crate::request::ctx::RequestCtx;
use crate::request::respond;

/// Whether the agent asked for the call's notifications.
pub fn wanted(session: &Session, params: Option<&RawValue>) -> bool {
    let sse = session
        .req_header()
        .headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    let token = params
        .and_then(raw::object)
        .and_then(|m| {
            raw::get(&m, "_meta")
                .and_then(raw::object)
                .map(|meta| raw::get(&meta, "progressToken").is_some())
        })
        .unwrap_or(false);
    sse && token
}

/// Runs `call`, writing each notification that arrives meanwhile to the agent as an event
/// (the stream opened at the first); returns the call's outcome and whether the stream was
/// opened (then the response must go out with [`finish`]).
pub async fn drive<T>(
    session: &mut Session,
    ctx: &RequestCtx,
    call: impl Future<Output = T>,
    mut notes: UnboundedReceiver<Vec<u8>>,
) -> (T, bool) {
    tokio::pin!(call);
    let mut opened = false;
    let out = loop {
        tokio::select! {
            out = &mut call => break out,
            Some(note) = notes.recv() => opened = event(session, ctx, &note, opened).await,
        }
    };
    // What arrived with the response, in order, before it.
    while let Ok(note) = notes.try_recv() {
        opened = event(session, ctx, &note, opened).await;
    }
    (out, opened)
}

/// Writes one event, opening the stream first when it is not; true once opened.
async fn event(session: &mut Session, ctx: &RequestCtx, data: &[u8], opened: bool) -> bool {
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
        if session
            .write_response_header(Box::new(h), false)
            .await
            .is_err()
        {
            return false;
        }
    }
    let mut e = Vec::with_capacity(data.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend_from_slice(data);
    e.extend_from_slice(b"\n\n");
    // A client gone mid-call still has the call settled; its events are dropped.
    let _ = session
        .write_response_body(Some(Bytes::from(e)), false)
        .await;
    true
}

/// The call's response as the stream's last event, and the end of the stream.
pub async fn finish(session: &mut Session, message: &[u8]) {
    let mut e = Vec::with_capacity(message.len() + 24);
    e.extend_from_slice(b"event: message\ndata: ");
    e.extend_from_slice(message);
    e.extend_from_slice(b"\n\n");
    let _ = session
        .write_response_body(Some(Bytes::from(e)), true)
        .await;
}
