//! What a front door other than chat completions adds to the internal chat request it is
//! served as: the pipeline ([`super::serve`]) reads it where a format differs.

use serde_json::Value;
use tollgate_filters::anthropic::request::MessagesRequest;
use tollgate_filters::openai::legacy::LegacyRequest;
use tollgate_filters::responses::request::ResponsesRequest;
use tollgate_filters::responses::stream::Opening;

/// What a front door other than chat completions adds to the internal chat request.
#[derive(Clone, Copy, Default)]
pub struct Front<'a> {
    /// The body as an Anthropic client sent it (`/v1/messages`).
    pub anthropic: Option<&'a MessagesRequest<'a>>,
    /// The Anthropic client's `anthropic-beta` header, forwarded to Anthropic providers (the
    /// body may carry fields only a beta accepts: `context_management`, a `system` turn).
    pub anthropic_beta: Option<&'a str>,
    /// A Responses client's request (`/v1/responses`): its reply is a response object, its
    /// stream Responses events.
    pub responses: Option<&'a ResponsesFront<'a>>,
    /// A legacy completion (`/v1/completions`): passed on as the client wrote it, to the
    /// models that serve it.
    pub completions: Option<&'a LegacyRequest<'a>>,
    /// A Gemini request (`/v1beta/models/…`): its reply and stream in Gemini's shape.
    pub gemini: Option<&'a GeminiFront>,
    /// What the request said of resuming a cut stream (the `X-Tollgate-Resume` header, the
    /// body's `tollgate.resume`); `None`: the config's default.
    pub resume: Option<bool>,
}

/// What a Gemini reply needs besides the chat reply.
pub struct GeminiFront {
    /// The `responseId`.
    pub id: String,
    /// Stream as Server-Sent Events (`alt=sse`), else as one JSON array.
    pub sse: bool,
}

/// A Responses request as the pipeline needs it: what its reply starts from, and, for a
/// provider that serves the Responses API itself, the request and its chain's conversation.
pub struct ResponsesFront<'a> {
    pub opening: &'a Opening,
    pub request: &'a ResponsesRequest,
    /// The `previous_response_id` chain's items, oldest first.
    pub history: &'a [Value],
}
