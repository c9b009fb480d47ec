//! What the chat stream relay needs from a translator of one upstream's SSE stream into the
//! client's wire format: OpenAI → OpenAI ([`crate::openai::stream::StreamRewriter`]), and the
//! Anthropic translations in [`crate::anthropic::stream`] (Anthropic → OpenAI, Anthropic →
//! Anthropic, OpenAI → Anthropic). The relay owns the I/O, the deadlines and the commit rule;
//! a translator only turns events into bytes and remembers what metering needs.

use crate::cost::Cost;
use crate::openai::stream::{sse_event, StreamRewriter, StreamStep};
use crate::{GatewayError, Usage};

pub trait StreamTranslator: Send {
    /// One upstream event: its `event:` name when it had one, and its data.
    fn on_event(&mut self, event: Option<&str>, data: &str) -> StreamStep;
    /// Whether the client has been given output (text, a tool call, a refusal, a finish); until
    /// then the stream is not committed and a failure fails over (DESIGN.md, Rules: Streams).
    fn has_output(&self) -> bool;
    /// The upstream said how the completion finished (`finish_reason`, `stop_reason`).
    fn finished(&self) -> bool;
    /// The usage the upstream reported, once it has.
    fn upstream_usage(&self) -> Option<Usage>;
    /// Text and tool-call arguments delivered so far, for the tokenizer when no usage came.
    fn delivered_text(&self) -> &str;
    /// The stream is over (`failure`: it broke, with the error its client is told), before
    /// the settlement: a translator that keeps the whole reply as one object builds it here
    /// (a Responses stream's final response object, stored for `previous_response_id` before
    /// the client can name it), for [`StreamTranslator::take_object`]. Its usage carries no
    /// cost: that is known after the settlement, when the closing events are written.
    fn end(&mut self, _usage: Usage, _failure: Option<&GatewayError>) {}
    /// The events that end a stream that did not break, after the settlement, given its final
    /// usage (the upstream's, or counted) and, for a metered request, its cost: whatever the
    /// client's format still needs after the upstream's last event (a finish, the usage it
    /// asked for with the cost in it, `[DONE]` / `message_stop`).
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8>;
    /// An error event in the client's format, for a stream that broke after the commit.
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8>;
    /// The whole reply as one object, for a client format that keeps it; taken once, after
    /// [`StreamTranslator::end`].
    fn take_object(&mut self) -> Option<serde_json::Value> {
        None
    }
    /// The stream's `Content-Type` (a Gemini stream without `alt=sse` is one JSON array).
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }
    /// Whether another upstream could continue the stream from here (a resumed stream,
    /// [`crate::resume`]): only text was delivered and the upstream did not finish.
    fn resumable(&self) -> bool {
        false
    }
    /// Continues the stream with `next`, the translator of the upstream that continues the
    /// answer; `false` when this stream cannot (it was not built to resume).
    fn resume(&mut self, _next: Box<dyn StreamTranslator>) -> bool {
        false
    }
}

impl StreamTranslator for StreamRewriter {
    fn on_event(&mut self, _event: Option<&str>, data: &str) -> StreamStep {
        StreamRewriter::on_event(self, data)
    }
    fn has_output(&self) -> bool {
        StreamRewriter::has_output(self)
    }
    fn finished(&self) -> bool {
        StreamRewriter::finished(self)
    }
    fn upstream_usage(&self) -> Option<Usage> {
        StreamRewriter::upstream_usage(self)
    }
    fn delivered_text(&self) -> &str {
        StreamRewriter::delivered_text(self)
    }
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        StreamRewriter::close(self, usage, cost)
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        // The usage chunk held back goes first, as it would have without the break.
        let mut out = self
            .take_held_usage()
            .map(|c| sse_event(&c))
            .unwrap_or_default();
        out.extend(sse_event(&err.to_value()));
        out
    }
}
