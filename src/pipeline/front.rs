//! The front door as a type: what the pipeline ([`super::serve`]) asks of the door a request
//! came in by, wherever the formats differ. Each door of `crate::fronts` implements
//! [`FrontDoor`]; chat completions, whose body is the internal chat request, takes every
//! default. A new door overrides what it changes and leaves the pipeline as it is.

use tollgate_filters::anthropic::request::check_translatable;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;
use tollgate_filters::sticky::Signal;
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::{GatewayError, Usage};

use super::translate;
use crate::config::{EndpointUrl, Provider, ProviderKind};
use crate::request::ctx::{RequestCtx, Wire};
use crate::upstream::provider;

/// A request's front door with what the request said of resuming.
#[derive(Clone, Copy)]
pub struct Front<'a> {
    pub door: &'a dyn FrontDoor,
    /// What the request said of resuming a cut stream (the `X-Tollgate-Resume` header, the
    /// body's `tollgate.resume`); `None`: the config's default.
    pub resume: Option<bool>,
    /// What the request said of the response cache (the default: a door that never caches).
    pub cache: crate::response_cache::Ask<'a>,
}

/// What a front door adds to the internal chat request it is served as. `Sync`: the
/// pipeline's future holds it across its awaits.
pub trait FrontDoor: Sync {
    /// Refuses, before anything is held, a request the first candidate (`model` of
    /// `provider`) cannot carry faithfully; a later candidate is skipped instead (its body
    /// cannot be written: [`FrontDoor::upstream_body`]).
    fn check_first(
        &self,
        req: &ChatRequest<'_>,
        model: &ModelSpec,
        provider: &Provider,
    ) -> Result<(), GatewayError> {
        let _ = model;
        match provider.kind.wire() {
            ProviderKind::Anthropic => check_translatable(req),
            _ => Ok(()),
        }
    }

    /// Whether `model` serves this door (`None`: a tier, whose pick is the gateway's).
    fn serves(&self, model: Option<&ModelSpec>) -> bool {
        let _ = model;
        true
    }

    /// The refusal of a model (or tier) `asked` that [`FrontDoor::serves`] says does not.
    fn not_served(&self, asked: &str) -> GatewayError {
        GatewayError::invalid(format!("model: `{asked}` does not serve this API"))
    }

    /// What the request's body says of the conversation it belongs to, for sticky routing
    /// (`crate::routing`; the `x-session-id` header, read by the pipeline, comes first): OpenAI's
    /// `prompt_cache_key` by default.
    fn conversation<'r>(&self, req: &ChatRequest<'r>) -> Signal<'r> {
        match req.get("prompt_cache_key") {
            Some(k) => Signal::Named(k.get().as_bytes()),
            None => Signal::Unsaid,
        }
    }

    /// Whether a cut stream of this door can be continued at all (it has a seam to carry on
    /// at), and on a candidate of `provider`.
    fn resumes_on(&self, provider: Option<&Provider>) -> bool {
        let _ = provider;
        true
    }

    /// The path of the request on `endpoint` of `provider`.
    fn upstream_path(&self, provider: &Provider, endpoint: &EndpointUrl) -> String {
        provider::chat_path(provider, endpoint)
    }

    /// A header the request carries besides the provider's own (Anthropic's beta flags).
    fn upstream_header(&self, provider: &Provider) -> Option<(&'static str, &str)> {
        let _ = provider;
        None
    }

    /// The body a candidate gets: `model` of `provider`, sized at `max_tokens`. A door may
    /// say in `ctx` what its bridging left out (`X-Tollgate-Warning`).
    fn upstream_body(
        &self,
        req: &ChatRequest<'_>,
        provider: &Provider,
        model: &ModelSpec,
        max_tokens: u64,
        ctx: &mut RequestCtx,
    ) -> Result<Vec<u8>, GatewayError> {
        let _ = ctx;
        self.chat_body(req, provider, &model.upstream_model, max_tokens)
    }

    /// The internal chat request in `provider`'s shape (also what a stream's continuation
    /// starts from).
    fn chat_body(
        &self,
        req: &ChatRequest<'_>,
        provider: &Provider,
        upstream_model: &str,
        max_tokens: u64,
    ) -> Result<Vec<u8>, GatewayError> {
        provider::chat_body(provider, req, None, upstream_model, max_tokens)
    }

    /// A non-streaming reply of `provider` for the client: the body, its usage, and whether
    /// that usage was counted (`count` gets the reply's text when the provider reported none).
    fn reply(
        &self,
        wire: Wire,
        provider: &Provider,
        raw: &[u8],
        model: &str,
        count: &mut dyn FnMut(&str) -> Usage,
    ) -> Result<(Vec<u8>, Usage, bool), String> {
        translate::chat_reply(wire, provider.kind.wire(), raw, model, count)
    }

    /// The translator of one upstream stream of `provider` into the client's format;
    /// `resume`: the request opted in to resuming a cut stream (see
    /// [`translate::chat_stream`]).
    fn stream(
        &self,
        wire: Wire,
        provider: &Provider,
        model: &str,
        client_wants_usage: bool,
        resume: bool,
    ) -> Box<dyn StreamTranslator> {
        let kind = provider.kind.wire();
        translate::chat_stream(wire, kind, model, client_wants_usage, resume)
    }
}
