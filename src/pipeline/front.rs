//! What a front door other than chat completions adds to the internal chat request it is
//! served as: the pipeline ([`super::serve`]) reads it where a format differs.

use serde_json::Value;
use tollgate_filters::anthropic::request::MessagesRequest;
use tollgate_filters::openai::legacy::LegacyRequest;
use tollgate_filters::responses::request::ResponsesRequest;
use tollgate_filters::responses::stream::Opening;

/// The front door a chat request came in by, with what the pipeline reads of it where the
/// formats differ; one door per request, by its type.
#[derive(Clone, Copy, Default)]
pub struct Front<'a> {
    pub door: Via<'a>,
    /// What the request said of resuming a cut stream (the `X-Tollgate-Resume` header, the
    /// body's `tollgate.resume`); `None`: the config's default.
    pub resume: Option<bool>,
}

/// What a front door other than chat completions adds to the internal chat request.
#[derive(Clone, Copy, Default)]
pub enum Via<'a> {
    /// OpenAI's chat completions: the internal request is the client's own.
    #[default]
    Chat,
    /// Anthropic's Messages API (`/v1/messages`): the body as the client sent it, and its
    /// `anthropic-beta` header, forwarded to Anthropic providers (the body may carry fields
    /// only a beta accepts: `context_management`, a `system` turn).
    Messages {
        request: &'a MessagesRequest<'a>,
        beta: Option<&'a str>,
    },
    /// OpenAI's Responses API (`/v1/responses`): its reply is a response object, its stream
    /// Responses events.
    Responses(&'a ResponsesFront<'a>),
    /// A legacy completion (`/v1/completions`): passed on as the client wrote it, to the
    /// models that serve it.
    Completions(&'a LegacyRequest<'a>),
    /// A Gemini request (`/v1beta/models/…`): its reply and stream in Gemini's shape.
    Gemini(&'a GeminiFront),
}

impl<'a> Front<'a> {
    pub fn of(door: Via<'a>) -> Front<'a> {
        Front { door, resume: None }
    }

    /// The Anthropic client's body as sent.
    pub fn anthropic(&self) -> Option<&'a MessagesRequest<'a>> {
        match self.door {
            Via::Messages { request, .. } => Some(request),
            _ => None,
        }
    }

    /// The Anthropic client's `anthropic-beta` header.
    pub fn anthropic_beta(&self) -> Option<&'a str> {
        match self.door {
            Via::Messages { beta, .. } => beta,
            _ => None,
        }
    }

    pub fn responses(&self) -> Option<&'a ResponsesFront<'a>> {
        match self.door {
            Via::Responses(r) => Some(r),
            _ => None,
        }
    }

    pub fn completions(&self) -> Option<&'a LegacyRequest<'a>> {
        match self.door {
            Via::Completions(l) => Some(l),
            _ => None,
        }
    }

    pub fn gemini(&self) -> Option<&'a GeminiFront> {
        match self.door {
            Via::Gemini(g) => Some(g),
            _ => None,
        }
    }
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
