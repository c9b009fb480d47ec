//! `POST /v1/responses`: OpenAI's Responses API in front of every chat model, on the chat
//! pipeline: the caller authenticated and admitted by the route table → read and check the
//! body → the `previous_response_id` chain read from the ledger ([`stored`]) → the
//! conversation written as the internal chat request → route, hold, forward
//! ([`crate::pipeline::serve`]; a stream is written as Responses events by the relay) → the reply
//! as a response object → stored when `store` → settled once and answered
//! ([`crate::pipeline::settle_and_answer`]).
//!
//! [`stored`] also serves `GET`/`DELETE /v1/responses/{id}` and `…/input_items`.

mod door;
pub mod stored;

use std::sync::Arc;

use crate::request::Session;
use serde_json::Value;
use tollgate_filters::openai::request::parse_chat_request;
use tollgate_filters::responses::items::with_ids;
use tollgate_filters::responses::request::{parse_responses_request, ResponsesRequest};
use tollgate_filters::responses::stream::Opening;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::ledger::responses::NewResponse;
use crate::pipeline::forward::Reply;
use crate::pipeline::front::Front;
use crate::pipeline::{serve, settle_and_answer};
use crate::request::body;
use crate::request::ctx::{Door, RequestCtx, Wire};
use crate::runtime::Shared;
use door::ResponsesDoor;

/// OpenAI's Responses API (`/v1/responses`, stored responses).
pub const RESPONSES: Door = Door {
    name: "responses",
    wire: Wire::OpenAi,
    what: "chat completion",
};

/// Runs a Responses request of `caller` (resolved and admitted by the route table).
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let result = pipeline(shared, session, ctx, caller).await;
    settle_and_answer(shared, session, ctx, result).await
}

async fn pipeline(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<Reply, GatewayError> {
    let rt = shared.runtime.load_full();
    let raw = body::read_within(session, &rt.config).await?;
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    // The body's `tollgate` extension is the gateway's, not a Responses field.
    let (opt, raw) = super::without_extension(session, raw)?;
    let mut req = parse_responses_request(&raw)?;
    ctx.model_requested = Some(req.model.clone());
    let account = caller.account_id();
    if account.is_none() {
        // A guest has no account to keep a response in, nor to find one in.
        if req.previous_response_id.is_some() {
            return Err(GatewayError::new(
                ErrorKind::Authentication,
                "previous_response_id needs an API key: send Authorization: Bearer <API key>",
            ));
        }
        req.store = false;
        req.frame.store = false;
    }
    let now = crate::clock::now_secs();
    let history = match (&req.previous_response_id, account) {
        (Some(prev), Some(account)) => {
            stored::history(shared.ledger()?, account, prev, now, &rt).await?
        }
        _ => Vec::new(),
    };
    let chat_body = req.chat_body(&history)?;
    let mut chat = parse_chat_request(&chat_body)?;
    // The relay reads the usage chunk itself: the Responses stream carries usage in
    // `response.completed`.
    chat.client_wants_usage = true;
    let opening = Opening {
        frame: Arc::new(req.frame.clone()),
        id: new_response_id(),
        created_at: now as u64,
    };
    let door = ResponsesDoor {
        opening: &opening,
        request: &req,
        history: &history,
        kept: Default::default(),
    };
    // Not cached: a stored response and its chain are written by the request itself.
    let front = Front {
        door: &door,
        resume: opt.resume,
        cache: Default::default(),
    };
    // The attempt wrote the reply as a response object (`door.rs`), or streamed it.
    let reply = serve(shared, session, ctx, caller, &chat, front)
        .await
        .map_err(in_responses_terms)?;
    let (reply, object) = match reply {
        Reply::Json(bytes) => (Reply::Json(bytes), door.take_kept()),
        Reply::Replay(r) => (Reply::Replay(r), None),
        Reply::Stream(mut s) => {
            let object = s.object.take();
            (Reply::Stream(s), object)
        }
    };
    if let (true, Some(account), Some(object)) = (req.store, account, object) {
        keep(shared, ctx, &req, account, &opening, &object).await;
    }
    Ok(reply)
}

/// Stores a served response for its account. A store that fails here loses no money (the
/// charge is settled after, on its own path): the response is answered, and a later
/// `previous_response_id` naming it gets 404; the log says why.
async fn keep(
    shared: &Shared,
    ctx: &RequestCtx,
    req: &ResponsesRequest,
    account: &str,
    opening: &Opening,
    object: &Value,
) {
    let Ok(ledger) = shared.ledger() else {
        return;
    };
    let retention = shared.runtime.load().config.responses.retention_secs;
    let row = NewResponse {
        id: opening.id.clone(),
        account_id: account.to_owned(),
        created_at: opening.created_at as i64,
        expires_at: opening.created_at as i64 + retention,
        previous_response_id: req.previous_response_id.clone(),
        input_items: Value::Array(with_ids(&req.input, &opening.id)).to_string(),
        body: object.to_string(),
    };
    if let Err(e) = shared.stored_responses.store(ledger, row).await {
        tracing::warn!(request_id = %ctx.request_id, response_id = %opening.id, "could not store the response: {e}");
    }
}

/// `resp_` and 48 random hex digits, as OpenAI's ids look.
fn new_response_id() -> String {
    let (a, b, c): (u64, u64, u64) = rand::random();
    format!("resp_{a:016x}{b:016x}{c:016x}")
}

/// A refusal of the internal chat request (a field the provider kind cannot honour) named as
/// the Responses client wrote it.
fn in_responses_terms(e: GatewayError) -> GatewayError {
    if e.kind != ErrorKind::InvalidRequest {
        return e;
    }
    const NAMES: &[(&str, &str)] = &[
        ("response_format", "text.format"),
        ("max_tokens", "max_output_tokens"),
        ("reasoning_effort", "reasoning.effort"),
        ("verbosity", "text.verbosity"),
        ("messages", "input"),
    ];
    for (chat, responses) in NAMES {
        if let Some(rest) = e.message.strip_prefix(chat) {
            return GatewayError::invalid(format!("{responses}{rest}"));
        }
    }
    e
}
