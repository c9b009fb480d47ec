//! `POST /v1/completions`: OpenAI's legacy text completions, on the chat pipeline: the caller
//! authenticated and admitted by the route table → read and check the body → the prompt as the
//! internal chat request (for routing, the hold and the tokenizer) → route among the models
//! that serve legacy completions (`[[models]] completions = true`, OpenAI-compatible providers
//! only), hold, forward the client's body with the model and output cap set, streamed or not
//! ([`crate::pipeline::serve`]) → settled once and answered ([`crate::pipeline::settle_and_answer`]).

use crate::request::Session;
use tollgate_filters::openai::legacy::parse_legacy_request;
use tollgate_filters::GatewayError;

use crate::auth::caller::Caller;
use crate::pipeline::front::{Front, Via};
use crate::pipeline::{serve, settle_and_answer};
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::runtime::Shared;

/// Runs a legacy completion of `caller` (resolved and admitted by the route table).
pub async fn handle(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let rt = shared.runtime.load_full();
    let raw = match body::read_within(session, &rt.config).await {
        Ok(raw) => raw,
        Err(e) => return settle_and_answer(shared, session, ctx, Err(e)).await,
    };
    let result = match parse_legacy_request(&raw) {
        Ok(legacy) => match legacy.chat() {
            Ok(chat) => {
                let front = Front::of(Via::Completions(&legacy));
                serve(shared, session, ctx, caller, &chat, front).await
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    settle_and_answer(shared, session, ctx, result).await
}
