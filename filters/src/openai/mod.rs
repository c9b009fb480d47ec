//! The OpenAI chat-completions wire format: the request a client sends (validated, then
//! rewritten per upstream attempt) and the reply passed back, streamed or whole.
//!
//! - [`request`]: validation against SPEC.md's request table and the upstream body.
//! - [`stream`]: per-event rewriting of an SSE stream, and the chunks the gateway adds.
//! - [`completion`]: the rewrite of a non-streaming reply.
//! - `splice`: the byte-level member splicer the request and both reply rewrites copy with.
//! - `tools`: the checks of `tools` and `tool_choice`.
//! - [`raw`]: reading members and their parts in place, as `&RawValue` slices of the body.

pub mod completion;
pub mod raw;
pub mod request;
pub(crate) mod splice;
pub mod stream;
#[cfg(test)]
mod tests_request;
mod tools;
