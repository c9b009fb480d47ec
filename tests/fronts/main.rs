//! The API's front doors beside chat completions, each routed and billed like chat, one file
//! per front or behaviour: `messages` (`/v1/messages`, Anthropic's Messages API, to both
//! provider kinds) and `messages_today` (what Claude Code sends today), `responses`
//! (`/v1/responses` on the chat pipeline), `responses_native` (a provider that serves the
//! Responses API itself), `responses_stored` (`previous_response_id` across two instances, read
//! and delete, retention), `completions` (legacy `/v1/completions`), `gemini` (the Gemini API),
//! `embeddings` (`/v1/embeddings`), `anthropic_provider` (provider kind `anthropic` behind the
//! OpenAI chat API), `cache_breakpoints` (prompt-cache marks the gateway adds), `cost_fields` (the cost in every reply, read by the `openai` and
//! `anthropic` Python SDKs: `tests/sdk/cost_fields.py`), `demo` (the built-in demo provider),
//! `routes` (404, 405 and guarded paths). Runs on SQLite, and on Postgres + Redis when set.
//!
//! Chat completions themselves are `tests/chat.rs`, and the model changelog
//! `tests/changelog.rs`, binaries of their own: one bounds `/healthz`'s latency while prompts
//! are counted, the other has an alias switch 3 s after its gateway is configured.

mod anthropic_provider;
mod cache_breakpoints;
mod completions;
mod cost_fields;
mod demo;
mod embeddings;
mod gemini;
mod messages;
mod messages_today;
mod responses;
mod responses_native;
mod responses_stored;
mod routes;
