//! The OpenAI chat-completions wire format: the request a client sends (validated, then
//! rewritten per upstream attempt) and the reply passed back, streamed or whole.
//!
//! - [`request`]: validation against SPEC.md's request table and the upstream body.
//! - [`stream`]: per-event rewriting of an SSE stream, and the chunks the gateway adds.
//! - [`completion`]: the rewrite of a non-streaming reply.
//! - `splice`: the byte-level member splicer both rewrites copy replies with.

pub mod completion;
pub mod request;
mod splice;
pub mod stream;
