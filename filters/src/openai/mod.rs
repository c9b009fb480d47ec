//! The OpenAI chat-completions wire format: the request a client sends (validated, then
//! rewritten per upstream attempt) and the reply passed back, streamed or whole.
//!
//! - [`request`]: validation against SPEC.md's request table and the upstream body.
//! - [`stream`]: per-event rewriting of an SSE stream, and the chunks the gateway adds.
//! - [`completion`]: the rewrite of a non-streaming reply.
//! - [`embeddings`]: `POST /v1/embeddings`, its request checked and its reply rewritten.
//! - [`legacy`]: `POST /v1/completions` (legacy text completions): the request checked, its
//!   upstream body, the reply and stream chunks rewritten.
//! - `tools`: the checks of `tools` and `tool_choice`.
//!
//! Members are read in place and bodies spliced by `crate::json` (shared with the Anthropic
//! and MCP formats).

pub mod completion;
pub mod embeddings;
pub mod legacy;
pub mod request;
pub mod stream;
#[cfg(test)]
mod tests_request;
#[cfg(test)]
mod tests_stream;
mod tools;
