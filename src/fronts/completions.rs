//! `POST /v1/completions`: OpenAI's legacy text completions, on the chat pipeline: the caller
//! authenticated and admitted by the route table → read and check the body → the prompt as the
//! internal chat request (for routing, the hold and the tokenizer) → route among the models
//! that serve legacy completions (`[[models]] completions = true`, OpenAI-compatible providers
//! only), hold, forward the client's body with the model and output cap set, streamed or not
//! ([`crate::pipeline::serve`]) → settled once and answered ([`crate::pipeline::settle_and_answer`]).

use crate::request::Session;
use tollgate_filters::openai::legacy::{
    parse_legacy_request, rewrite_legacy, LegacyRequest, LegacyStream,
};
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::{GatewayError, Usage};

use crate::auth::caller::Caller;
use crate::config::{EndpointUrl, Provider};
use crate::pipeline::front::{Front, FrontDoor};
use crate::pipeline::{serve, settle_and_answer};
use crate::request::body;
use crate::request::ctx::{Door, RequestCtx, Wire};
use crate::runtime::Shared;
use crate::upstream::provider;

/// OpenAI's legacy completions (`/v1/completions`).
pub const COMPLETIONS: Door = Door {
    name: "completions",
    wire: Wire::OpenAi,
    what: "chat completion",
};

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
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    let result = match parse_legacy_request(&raw) {
        Ok(legacy) => match legacy.chat() {
            Ok(chat) => {
                let front = Front {
                    door: &Legacy(&legacy),
                    resume: None,
                    cache: Default::default(),
                };
                serve(shared, session, ctx, caller, &chat, front).await
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    settle_and_answer(shared, session, ctx, result).await
}

/// The legacy completions door: the client's body passed on, with the model and output cap
/// set, to the models that serve it; its reply and stream in its own shape, never resumed
/// (no seam to continue at).
struct Legacy<'a>(&'a LegacyRequest<'a>);

impl FrontDoor for Legacy<'_> {
    fn serves(&self, model: Option<&ModelSpec>) -> bool {
        // A tier's pick is the gateway's: a legacy completion names its model.
        model.is_some_and(|m| m.completions)
    }

    fn not_served(&self, asked: &str) -> GatewayError {
        GatewayError::invalid(format!(
            "model: `{asked}` does not serve legacy completions; send it to POST /v1/chat/completions"
        ))
    }

    fn resumes_on(&self, _provider: Option<&Provider>) -> bool {
        false
    }

    fn upstream_path(&self, _provider: &Provider, endpoint: &EndpointUrl) -> String {
        provider::completions_path(endpoint)
    }

    fn upstream_body(
        &self,
        _req: &ChatRequest<'_>,
        _provider: &Provider,
        model: &ModelSpec,
        max_tokens: u64,
        _ctx: &mut RequestCtx,
    ) -> Result<Vec<u8>, GatewayError> {
        Ok(self.0.upstream_body(&model.upstream_model, max_tokens))
    }

    fn reply(
        &self,
        _wire: Wire,
        _provider: &Provider,
        raw: &[u8],
        model: &str,
        count: &mut dyn FnMut(&str) -> Usage,
    ) -> Result<(Vec<u8>, Usage, bool), String> {
        rewrite_legacy(raw, model, count)
    }

    fn stream(
        &self,
        _wire: Wire,
        _provider: &Provider,
        model: &str,
        client_wants_usage: bool,
        _resume: bool,
    ) -> Box<dyn StreamTranslator> {
        Box::new(LegacyStream::new(model, client_wants_usage))
    }
}
