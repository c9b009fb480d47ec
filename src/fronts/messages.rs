//! `POST /v1/messages`: Anthropic's Messages API in front of the pipeline. The request is
//! validated as Anthropic validates it, carried both as sent (for Anthropic providers) and
//! translated into the internal chat request (for everything the pipeline reads), routed,
//! held, failed over and settled like any chat request; every answer, errors included, is in
//! Anthropic's shape (its route row's door). Besides: `POST /v1/messages/count_tokens`,
//! answered by the gateway's own tokenizer.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::anthropic::request::{count_tokens_messages, parse_messages_request};
use tollgate_filters::route::Target;
use tollgate_filters::{tokens, ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::pipeline::front::{Front, Via};
use crate::pipeline::tokenize::off_thread;
use crate::pipeline::{forward, serve, settle_and_answer};
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// Runs a Messages request of `caller` (resolved and admitted by the route table).
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let result = run(shared, session, ctx, caller).await;
    settle_and_answer(shared, session, ctx, result).await
}

async fn run(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<forward::Reply, GatewayError> {
    let rt = shared.runtime.load_full();
    let raw = body::read_within(session, &rt.config).await?;
    let (resume, raw) = super::without_extension(session, raw)?;
    let request = parse_messages_request(&raw)?;
    // The internal request borrows from the Anthropic mirror, which this future keeps until
    // the request is done.
    let req = request.chat()?;
    let beta = session
        .req_header()
        .headers
        .get("anthropic-beta")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let door = Via::Messages {
        request: &request,
        beta: beta.as_deref(),
    };
    serve(shared, session, ctx, caller, &req, Front { door, resume }).await
}

/// `{"input_tokens": n}`: the prompt (system, messages and tools) counted with o200k_base,
/// the tokenizer the gateway meters with when a provider reports no usage. Anthropic's own
/// tokenizer differs; the number is an estimate of the same order (docs/api.md). Counted against
/// the caller's rate limit like any request, free of credits.
pub async fn count_tokens(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load_full();
    let raw = body::read_within(session, &rt.config).await?;
    let messages = count_tokens_messages(&raw)?;
    // The model must be one the caller may use, as for the request it is counting.
    let model = serde_json::from_slice::<serde_json::Value>(&raw)
        .ok()
        .and_then(|v| v["model"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let resolution = rt
        .config
        .catalog
        .resolve(&model, crate::clock::now_secs())?;
    if let (Caller::Guest, Target::Model(i)) = (&caller, resolution.target) {
        if !rt.config.catalog.model(i).guest {
            return Err(GatewayError::new(
                ErrorKind::Authentication,
                format!("model `{model}` needs an API key: send x-api-key: <API key>"),
            ));
        }
    }
    let n = off_thread(shared, move || tokens::count_prompt(&messages))
        .await
        .ok_or_else(|| GatewayError::internal("the token count failed"))?;
    respond::json(session, ctx, 200, &json!({"input_tokens": n}), &[]).await;
    Ok(())
}
