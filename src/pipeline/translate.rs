//! The chat translations every chat-shaped front door shares: the client's wire format
//! (`ctx.wire`) against the provider's kind. OpenAI → OpenAI is a rewrite in place; the three
//! pairs with Anthropic on either side are the pure functions of `tollgate_filters::anthropic`.
//! A door whose reply has another shape (`crate::fronts`: Responses, Gemini, legacy
//! completions) writes it from these, or passes its own through.

use tollgate_filters::anthropic::completion::{
    completion_to_message, message_to_completion, rewrite_message,
};
use tollgate_filters::anthropic::stream::{FromOpenAi, Passthrough, ToOpenAi};
use tollgate_filters::openai::completion::rewrite_completion;
use tollgate_filters::openai::stream::StreamRewriter;
use tollgate_filters::resume::{Frame, Seamed};
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::Usage;

use crate::config::ProviderKind;
use crate::request::ctx::Wire;

/// A non-streaming chat reply of a provider of `kind` in the client's wire format: the
/// body, its usage, and whether that usage was counted (`count` gets the reply's text when
/// the provider reported none).
pub fn chat_reply(
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

/// The chat translator of one upstream stream of a provider of `kind`. `resume`: the request
/// opted in to resuming a cut stream: the translator is [`Seamed`], which a continuation's
/// translator ([`leg`]) can carry on.
pub fn chat_stream(
    wire: Wire,
    kind: ProviderKind,
    model: &str,
    client_wants_usage: bool,
    resume: bool,
) -> Box<dyn StreamTranslator> {
    let inner = leg(wire, kind, model, client_wants_usage);
    if !resume {
        return inner;
    }
    let frame = match wire {
        Wire::Anthropic => Frame::Messages,
        Wire::OpenAi | Wire::Gemini => Frame::Chat,
    };
    Box::new(Seamed::new(frame, inner))
}

/// A continuation's chat translator, for a [`Seamed`] stream to carry on with.
pub fn leg(
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
