//! Streams that survive a cut (docs/api.md, "Streams that survive a cut"), one file per
//! behaviour: `resume` (on chat completions: a provider that dies, sends an error event or
//! stalls mid-answer continued on the next, one stream, each leg charged at its rates; a cut in
//! a tool call, `max_resumes`, no opt-in), `resume_fronts` (an Anthropic provider continuing as
//! a prefill, `/v1/messages` and `/v1/responses` streams resumed, the `openai` and `anthropic`
//! SDKs reading a resumed stream: `tests/sdk/resume_sdk.py`), `resume_legs` (one `usage_legs`
//! row per leg, their credits the balance's fall). Runs on SQLite + in-process counters, and on
//! Postgres + Redis when set.

mod resume;
mod resume_fronts;
mod resume_legs;
