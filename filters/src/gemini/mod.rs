//! Google's Gemini API in front (`/v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent`, `:countTokens`): the request checked and written as the internal
//! chat request, the reply and stream written back from chat, errors in Google's shape.
//!
//! - [`request`]: `contents`, `systemInstruction`, function declarations, `toolConfig`,
//!   `generationConfig` checked and written as a chat request.
//! - [`reply`]: a chat completion as a `GenerateContentResponse`; Google's error shape.
//! - [`stream`]: the stream, as Server-Sent Events or one JSON array.

pub mod reply;
pub mod request;
pub mod stream;
#[cfg(test)]
mod tests;

/// A `models/{model}:{method}` path segment split into the model and the method.
pub fn split_method(segment: &str) -> Option<(&str, Method)> {
    let (model, method) = segment.rsplit_once(':')?;
    let method = match method {
        "generateContent" => Method::Generate,
        "streamGenerateContent" => Method::Stream,
        "countTokens" => Method::CountTokens,
        _ => return None,
    };
    (!model.is_empty()).then_some((model, method))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Generate,
    Stream,
    CountTokens,
}
