//! `POST /v1/messages`: Anthropic's Messages API in front of the pipeline. The request is
//! validated as Anthropic validates it, carried both as sent (for Anthropic providers) and
//! translated into the internal chat request (for everything the pipeline reads), routed,
//! held, failed over and settled like any chat request; every answer, errors included, is in
//! Anthropic's shape (its route row's door). Besides: `POST /v1/messages/count_tokens`,
//! answered by the gateway's own tokenizer.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::anthropic::request::{
    count_tokens_messages, parse_messages_request, MessagesRequest,
};
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::{ModelSpec, Target};
use tollgate_filters::sticky::Signal;
use tollgate_filters::{tokens, ErrorKind, GatewayError};

use crate::auth::caller::Caller;
use crate::config::{Provider, ProviderKind};
use crate::pipeline::front::{Front, FrontDoor};
use crate::pipeline::tokenize::off_thread;
use crate::pipeline::{forward, serve, settle_and_answer};
use crate::request::body;
use crate::request::ctx::{Door, RequestCtx, Wire};
use crate::request::respond;
use crate::runtime::Shared;
use crate::upstream::provider;

/// Anthropic's Messages API (`/v1/messages`, its `count_tokens`).
pub const MESSAGES: Door = Door {
    name: "messages",
    wire: Wire::Anthropic,
    what: "chat completion",
};

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
    crate::request_log::capture::request(ctx, caller, &rt.config, &raw);
    let (opt, raw) = super::without_extension(session, raw)?;
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
    let door = Messages {
        request: &request,
        beta,
    };
    serve(
        shared,
        session,
        ctx,
        caller,
        &req,
        Front {
            door: &door,
            resume: opt.resume,
            cache: opt.cache(&raw)?,
        },
    )
    .await
}

/// The Messages door: the body as the client sent it and its `anthropic-beta` header, both
/// forwarded to Anthropic providers (the body may carry fields only a beta accepts:
/// `context_management`, a `system` turn); an OpenAI provider gets the internal request.
struct Messages<'a> {
    request: &'a MessagesRequest<'a>,
    beta: Option<String>,
}

impl FrontDoor for Messages<'_> {
    fn check_first(
        &self,
        _req: &ChatRequest<'_>,
        model: &ModelSpec,
        provider: &Provider,
    ) -> Result<(), GatewayError> {
        // Extended thinking needs output room above its budget, and the model's cap bounds
        // that room whatever max_tokens asks: named here rather than failing every candidate.
        if let Some(budget) = self.request.thinking_budget() {
            if budget >= model.max_output_tokens {
                return Err(GatewayError::invalid(format!(
                    "thinking.budget_tokens: {budget} must be below the output cap, max_tokens capped at {} for `{}`",
                    model.max_output_tokens, model.id
                )));
            }
        }
        match provider.kind.wire() {
            ProviderKind::OpenAi => self.request.check_openai_translatable(),
            _ => Ok(()),
        }
    }

    fn conversation<'r>(&self, req: &ChatRequest<'r>) -> Signal<'r> {
        // The mirror carries `metadata.user_id` as `user`.
        match req.get("user") {
            Some(u) => Signal::Named(u.get().as_bytes()),
            None => Signal::Unsaid,
        }
    }

    fn upstream_header(&self, provider: &Provider) -> Option<(&'static str, &str)> {
        match provider.kind.wire() {
            ProviderKind::Anthropic => self.beta.as_deref().map(|b| ("anthropic-beta", b)),
            _ => None,
        }
    }

    fn chat_body(
        &self,
        req: &ChatRequest<'_>,
        provider: &Provider,
        upstream_model: &str,
        max_tokens: u64,
    ) -> Result<Vec<u8>, GatewayError> {
        let original = Some(self.request);
        provider::chat_body(provider, req, original, upstream_model, max_tokens)
    }
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
