//! The Responses door as the pipeline sees it: a chat provider gets the conversation as the
//! internal chat request and its reply is written as a response object (its stream as
//! Responses events); a provider that serves the Responses API itself (`responses_api`) gets
//! the client's request with its chain's conversation, and its own object is passed back
//! with the gateway's id and model.

use std::sync::Mutex;

use serde_json::Value;
use tollgate_filters::anthropic::request::check_translatable;
use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::responses::native::{rewrite_native, NativeStream};
use tollgate_filters::responses::reply::{completion_to_response, Head};
use tollgate_filters::responses::request::ResponsesRequest;
use tollgate_filters::responses::stream::{Opening, ResponsesStream};
use tollgate_filters::route::ModelSpec;
use tollgate_filters::sticky::Signal;
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::{GatewayError, Usage};

use crate::config::{EndpointUrl, Provider, ProviderKind};
use crate::pipeline::front::FrontDoor;
use crate::pipeline::translate;
use crate::request::ctx::{RequestCtx, Wire};
use crate::upstream::provider;

pub struct ResponsesDoor<'a> {
    /// What the reply starts from: its id, creation time and the request's echoed fields.
    pub opening: &'a Opening,
    pub request: &'a ResponsesRequest,
    /// The `previous_response_id` chain's items, oldest first.
    pub history: &'a [Value],
    /// The response object of the JSON reply that was served, kept when the request stores
    /// it (a stream's comes with the stream): stored as written, never parsed back.
    pub kept: Mutex<Option<Value>>,
}

impl ResponsesDoor<'_> {
    fn head(&self, model: &str) -> Head {
        Head {
            id: self.opening.id.clone(),
            created_at: self.opening.created_at,
            model: model.to_owned(),
        }
    }

    fn keep(&self, object: &Value) {
        if !self.request.store {
            return;
        }
        if let Ok(mut kept) = self.kept.lock() {
            *kept = Some(object.clone());
        }
    }

    /// The response object of the reply that was served, when one was kept.
    pub fn take_kept(&self) -> Option<Value> {
        self.kept.lock().ok().and_then(|mut k| k.take())
    }
}

impl FrontDoor for ResponsesDoor<'_> {
    fn check_first(
        &self,
        req: &ChatRequest<'_>,
        model: &ModelSpec,
        provider: &Provider,
    ) -> Result<(), GatewayError> {
        if let ProviderKind::Anthropic = provider.kind.wire() {
            check_translatable(req)?;
        }
        match provider.responses_api {
            true => Ok(()),
            false => self.request.check_bridgeable(&model.id),
        }
    }

    fn conversation<'r>(&self, req: &ChatRequest<'r>) -> Signal<'r> {
        match req.get("prompt_cache_key") {
            Some(k) => Signal::Named(k.get().as_bytes()),
            // The chain's conversation is written first, so its beginning is every turn's.
            None if self.request.previous_response_id.is_some() => Signal::Continued,
            None => Signal::Unsaid,
        }
    }

    fn resumes_on(&self, provider: Option<&Provider>) -> bool {
        // A provider serving the Responses API itself streams another shape.
        provider.is_none_or(|p| !p.responses_api)
    }

    fn upstream_path(&self, provider: &Provider, endpoint: &EndpointUrl) -> String {
        match provider.responses_api {
            true => provider::responses_path(endpoint),
            false => provider::chat_path(provider, endpoint),
        }
    }

    /// A Responses request bridged to a chat provider leaves its hosted tools out and says
    /// so in `X-Tollgate-Warning` (or cannot be bridged when it forces one).
    fn upstream_body(
        &self,
        req: &ChatRequest<'_>,
        provider: &Provider,
        model: &ModelSpec,
        max_tokens: u64,
        ctx: &mut RequestCtx,
    ) -> Result<Vec<u8>, GatewayError> {
        let up = &model.upstream_model;
        if provider.responses_api {
            return Ok(self.request.native_body(self.history, up, max_tokens));
        }
        self.request.check_bridgeable(&model.id)?;
        if let Some(w) = self.request.dropped_warning() {
            ctx.set_header("X-Tollgate-Warning", w);
        }
        self.chat_body(req, provider, up, max_tokens)
    }

    fn reply(
        &self,
        wire: Wire,
        provider: &Provider,
        raw: &[u8],
        model: &str,
        count: &mut dyn FnMut(&str) -> Usage,
    ) -> Result<(Vec<u8>, Usage, bool), String> {
        let head = self.head(model);
        let (object, usage, counted) = if provider.responses_api {
            rewrite_native(raw, &head, count)?
        } else {
            let kind = provider.kind.wire();
            let (chat, usage, counted) = translate::chat_reply(wire, kind, raw, model, count)?;
            let object = completion_to_response(&chat, &self.opening.frame, &head)?;
            (object, usage, counted)
        };
        self.keep(&object);
        Ok((object.to_string().into_bytes(), usage, counted))
    }

    fn stream(
        &self,
        wire: Wire,
        provider: &Provider,
        model: &str,
        client_wants_usage: bool,
        resume: bool,
    ) -> Box<dyn StreamTranslator> {
        if provider.responses_api {
            return Box::new(NativeStream::new(self.head(model)));
        }
        let kind = provider.kind.wire();
        let chat = translate::chat_stream(wire, kind, model, client_wants_usage, resume);
        Box::new(ResponsesStream::new(chat, self.opening, model))
    }
}
