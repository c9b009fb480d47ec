//! OpenAI's Responses API in front (`POST /v1/responses`): the request checked and written as
//! the internal chat request, the reply written back as a response object, streams as typed
//! events.
//!
//! - [`request`]: the body checked (a field a chat provider cannot honour is refused by name)
//!   and its conversation written as a chat-completions body.
//! - [`tools`]: `tools` and `tool_choice` as chat tools; hosted tools kept apart.
//! - [`items`]: input and output items, checked and written as chat messages; stored items'
//!   ids.
//! - [`reply`]: the response object, and a chat completion read into it.
//! - [`stream`]: the Responses events written from the internal stream of chat chunks.
//! - [`native`]: a provider that serves the Responses API itself: the body passed on, its
//!   reply and events passed back with the gateway's id and model.

pub mod items;
pub mod native;
pub mod reply;
pub mod request;
pub mod stream;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_messages;
pub mod tools;
