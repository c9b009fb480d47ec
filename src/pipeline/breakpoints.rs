//! Prompt-cache breakpoints (issue 53): whether a request's Anthropic body gets the gateway's
//! `cache_control` marks, and the marking ([`tollgate_filters::anthropic::breakpoints`]). On
//! when the model (`[[models]] cache_breakpoints`), the key or its organization opted in and
//! the prompt is estimated at `[routing] cache_breakpoint_min_tokens` or more: Anthropic
//! caches nothing shorter, and a cache write costs more than plain input.

use tollgate_filters::anthropic::breakpoints::add_breakpoints;
use tollgate_filters::credits::estimate_prompt_tokens;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::route::ModelSpec;

use crate::auth::caller::Caller;
use crate::config::{Provider, ProviderKind};
use crate::runtime::Runtime;

/// What decides the marks of one request, before its candidates are tried.
#[derive(Debug, Clone, Copy, Default)]
pub struct Breakpoints {
    /// The key or its organization opted in.
    caller: bool,
    /// The prompt is long enough to be cached.
    long: bool,
}

impl Breakpoints {
    /// For `req` by `caller`, routed to `candidates` (catalog indices).
    pub fn of(
        rt: &Runtime,
        caller: &Caller,
        req: &ChatRequest<'_>,
        candidates: &[usize],
    ) -> Breakpoints {
        let caller = matches!(caller, Caller::Key(k) if k.cache_breakpoints);
        let catalog = &rt.config.catalog;
        let any_model = candidates
            .iter()
            .any(|&i| catalog.model(i).cache_breakpoints);
        // The estimate is only worth its walk over the messages when someone opted in.
        let long = (caller || any_model)
            && estimate_prompt_tokens(req, req.raw_len)
                >= rt.config.routing.cache_breakpoint_min_tokens;
        Breakpoints { caller, long }
    }

    /// `body` for `model` of `provider`, with the marks when they are on for it.
    pub fn apply(&self, model: &ModelSpec, provider: &Provider, body: Vec<u8>) -> Vec<u8> {
        let on = self.long && (self.caller || model.cache_breakpoints);
        if !on || provider.kind.wire() != ProviderKind::Anthropic {
            return body;
        }
        add_breakpoints(&body).unwrap_or(body)
    }
}
