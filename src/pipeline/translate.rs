//! Which translation a reply goes through: the client's wire format (`ctx.wire`) against the
//! provider's kind, and what the front door adds ([`Shape`]). OpenAI → OpenAI is a rewrite in
//! place; the three pairs with Anthropic on either side are the pure functions of
//! `tollgate_filters::anthropic`. A Responses client's reply is the chat reply of the
//! provider's kind (the internal shape) written as a response object, unless the provider
//! serves the Responses API itself; a legacy completion is passed through in its own shape.

use tollgate_filters::anthropic::completion::{
    completion_to_message, message_to_completion, rewrite_message,
};
use tollgate_filters::anthropic::stream::{FromOpenAi, Passthrough, ToOpenAi};
use tollgate_filters::gemini::reply::completion_to_gemini;
use tollgate_filters::gemini::stream::GeminiStream;
use tollgate_filters::openai::completion::rewrite_completion;
use tollgate_filters::openai::legacy::{rewrite_legacy, LegacyStream};
use tollgate_filters::openai::stream::StreamRewriter;
use tollgate_filters::responses::native::{rewrite_native, NativeStream};
use tollgate_filters::responses::reply::{completion_to_response, Head};
use tollgate_filters::responses::stream::{Opening, ResponsesStream};
use tollgate_filters::resume::{Frame, Seamed};
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::Usage;

use super::front::{Front, GeminiFront, Via};
use crate::config::{Provider, ProviderKind};
use crate::request::ctx::Wire;

/// What one attempt's reply becomes, besides the wire format.
#[derive(Clone, Copy)]
pub enum Shape<'a> {
    /// A chat completion (OpenAI or Anthropic wire).
    Chat,
    /// A legacy completion, passed through.
    Legacy,
    /// A response object written from the chat reply.
    Responses(&'a Opening),
    /// A provider's own response object, passed back with the gateway's id and model.
    NativeResponses(&'a Opening),
    /// A Gemini response written from the chat reply.
    Gemini(&'a GeminiFront),
}

impl<'a> Shape<'a> {
    pub fn of(front: &Front<'a>, provider: &Provider) -> Shape<'a> {
        match front.door {
            Via::Gemini(g) => Shape::Gemini(g),
            Via::Completions(_) => Shape::Legacy,
            Via::Responses(r) if provider.responses_api => Shape::NativeResponses(r.opening),
            Via::Responses(r) => Shape::Responses(r.opening),
            Via::Chat | Via::Messages { .. } => Shape::Chat,
        }
    }
}

fn head(opening: &Opening, model: &str) -> Head {
    Head {
        id: opening.id.clone(),
        created_at: opening.created_at,
        model: model.to_owned(),
    }
}

/// A non-streaming reply for the client: the body, its usage, and whether that usage was
/// counted (`count` gets the reply's text when the provider reported none).
pub fn reply(
    wire: Wire,
    kind: ProviderKind,
    shape: Shape<'_>,
    raw: &[u8],
    model: &str,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Vec<u8>, Usage, bool), String> {
    match shape {
        Shape::Legacy => rewrite_legacy(raw, model, count),
        Shape::NativeResponses(o) => {
            let (object, usage, counted) = rewrite_native(raw, &head(o, model), count)?;
            Ok((object.to_string().into_bytes(), usage, counted))
        }
        Shape::Responses(o) => {
            let (chat, usage, counted) = chat_reply(wire, kind, raw, model, count)?;
            let object = completion_to_response(&chat, &o.frame, &head(o, model))?;
            Ok((object.to_string().into_bytes(), usage, counted))
        }
        Shape::Gemini(g) => {
            let (chat, usage, counted) = chat_reply(wire, kind, raw, model, count)?;
            let object = completion_to_gemini(&chat, model, &g.id)?;
            Ok((object.to_string().into_bytes(), usage, counted))
        }
        Shape::Chat => chat_reply(wire, kind, raw, model, count),
    }
}

fn chat_reply(
    wire: Wire,
    kind: ProviderKind,
    raw: &[u8],
    model: &str,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Vec<u8>, Usage, bool), String> {
    match (wire, kind.wire()) {
        (Wire::OpenAi | Wire::Gemini, ProviderKind::OpenAi | ProviderKind::Demo) => {
            rewrite_completion(raw, model, count)
        }
        (Wire::OpenAi | Wire::Gemini, ProviderKind::Anthropic) => {
            let (out, usage) = message_to_completion(raw, model, crate::clock::now_secs() as u64)?;
            Ok((out, usage, false))
        }
        (Wire::Anthropic, ProviderKind::Anthropic) => {
            let (out, usage) = rewrite_message(raw, model)?;
            Ok((out, usage, false))
        }
        (Wire::Anthropic, ProviderKind::OpenAi | ProviderKind::Demo) => {
            completion_to_message(raw, model, count)
        }
    }
}

/// The translator of one upstream stream into the client's format. A Responses client's is
/// the chat translator of the provider's kind, its chunks written as Responses events: the
/// chat chunk is the internal stream shape. `resume`: the request opted in to resuming a cut
/// stream: its chat translator is [`Seamed`], which a continuation's translator ([`leg`])
/// can carry on (a legacy completion, a provider's own Responses stream and a Gemini stream
/// do not resume).
pub fn stream(
    wire: Wire,
    kind: ProviderKind,
    model: &str,
    client_wants_usage: bool,
    shape: Shape<'_>,
    resume: bool,
) -> Box<dyn StreamTranslator> {
    let chat = || {
        let inner = chat_stream(wire, kind, model, client_wants_usage);
        if !resume {
            return inner;
        }
        let frame = match wire {
            Wire::Anthropic => Frame::Messages,
            Wire::OpenAi | Wire::Gemini => Frame::Chat,
        };
        Box::new(Seamed::new(frame, inner))
    };
    match shape {
        Shape::Legacy => Box::new(LegacyStream::new(model, client_wants_usage)),
        Shape::NativeResponses(o) => Box::new(NativeStream::new(head(o, model))),
        Shape::Responses(o) => Box::new(ResponsesStream::new(chat(), o, model)),
        Shape::Gemini(g) => Box::new(GeminiStream::new(
            chat_stream(wire, kind, model, client_wants_usage),
            model,
            &g.id,
            g.sse,
        )),
        Shape::Chat => chat(),
    }
}

/// A continuation's chat translator, for a [`Seamed`] stream to carry on with.
pub fn leg(
    wire: Wire,
    kind: ProviderKind,
    model: &str,
    client_wants_usage: bool,
) -> Box<dyn StreamTranslator> {
    chat_stream(wire, kind, model, client_wants_usage)
}

fn chat_stream(
    wire: Wire,
    kind: ProviderKind,
    model: &str,
    client_wants_usage: bool,
) -> Box<dyn StreamTranslator> {
    match (wire, kind.wire()) {
        (Wire::OpenAi | Wire::Gemini, ProviderKind::OpenAi | ProviderKind::Demo) => {
            Box::new(StreamRewriter::new(model, client_wants_usage))
        }
        (Wire::OpenAi | Wire::Gemini, ProviderKind::Anthropic) => Box::new(ToOpenAi::new(
            model,
            client_wants_usage,
            crate::clock::now_secs() as u64,
        )),
        (Wire::Anthropic, ProviderKind::Anthropic) => Box::new(Passthrough::new(model)),
        (Wire::Anthropic, ProviderKind::OpenAi | ProviderKind::Demo) => {
            Box::new(FromOpenAi::new(model))
        }
    }
}
