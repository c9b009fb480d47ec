//! `POST /v1/chat/completions`: OpenAI's chat completions, whose body is the internal chat
//! request itself; served by the pipeline as it is.

use tollgate_filters::openai::request::parse_chat_request;
use tollgate_filters::GatewayError;

use crate::auth::caller::Caller;
use crate::pipeline::front::{Front, FrontDoor};
use crate::pipeline::{forward, serve, settle_and_answer};
use crate::request::body;
use crate::request::ctx::{Door, RequestCtx, Wire};
use crate::request::Session;
use crate::runtime::Shared;

/// OpenAI's chat completions (`/v1/chat/completions`).
pub const CHAT: Door = Door {
    name: "chat_completions",
    wire: Wire::OpenAi,
    what: "chat completion",
};

/// Runs a chat completion of `caller` (resolved and admitted by the route table).
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
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    let (opt, raw) = super::without_extension(session, raw)?;
    // The request borrows from the body it was parsed from, which this future keeps until the
    // request is done: nothing is copied out of it.
    let req = parse_chat_request(&raw)?;
    let front = Front {
        door: &ChatCompletions,
        resume: opt.resume,
        cache: opt.cache(&raw)?,
    };
    serve(shared, session, ctx, caller, &req, front).await
}

/// Chat completions' door: its body is the internal chat request, and every translation the
/// pipeline's own ([`FrontDoor`]'s defaults).
pub struct ChatCompletions;

impl FrontDoor for ChatCompletions {}
