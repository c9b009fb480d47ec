//! Which translation a reply goes through: the client's wire format (`ctx.wire`) against the
//! provider's kind. OpenAI → OpenAI is a rewrite in place; the three pairs with Anthropic on
//! either side are the pure functions of `tollgate_filters::anthropic`.

use tollgate_filters::anthropic::completion::{
    completion_to_message, message_to_completion, rewrite_message,
};
use tollgate_filters::anthropic::stream::{FromOpenAi, Passthrough, ToOpenAi};
use tollgate_filters::openai::completion::rewrite_completion;
use tollgate_filters::openai::stream::StreamRewriter;
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::Usage;

use crate::config::ProviderKind;
use crate::request::ctx::Wire;

/// A non-streaming reply for the client: the body, its usage, and whether that usage was
/// counted (`count` gets the reply's text when the provider reported none).
pub fn reply(
    wire: Wire,
    kind: ProviderKind,
    raw: &[u8],
    model: &str,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Vec<u8>, Usage, bool), String> {
    match (wire, kind.wire()) {
        (Wire::OpenAi, ProviderKind::OpenAi | ProviderKind::Demo) => {
            rewrite_completion(raw, model, count)
        }
        (Wire::OpenAi, ProviderKind::Anthropic) => {
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

/// The translator of one upstream stream into the client's format.
pub fn stream(
    wire: Wire,
    kind: ProviderKind,
    model: &str,
    client_wants_usage: bool,
) -> Box<dyn StreamTranslator> {
    match (wire, kind.wire()) {
        (Wire::OpenAi, ProviderKind::OpenAi | ProviderKind::Demo) => {
            Box::new(StreamRewriter::new(model, client_wants_usage))
        }
        (Wire::OpenAi, ProviderKind::Anthropic) => Box::new(ToOpenAi::new(
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
