//! What the chat stream relay needs from a translator of one upstream's SSE stream into the
//! client's wire format: OpenAI → OpenAI ([`crate::openai::stream::StreamRewriter`]), and the
//! Anthropic translations in [`crate::anthropic::stream`] (Anthropic → OpenAI, Anthropic →
//! Anthropic, OpenAI → Anthropic). The relay owns the I/O, the deadlines and the commit rule;
//! a translator only turns events into bytes and remembers what metering needs.

use crate::openai::stream::{sse_event, StreamRewriter, StreamStep, DONE_EVENT};
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
    /// The events that end a stream that did not break, given its final usage (the
    /// upstream's, or counted): whatever the client's format still needs after the upstream's
    /// last event (a finish, the usage it asked for, `[DONE]` / `message_stop`).
    fn close(&mut self, usage: Usage) -> Vec<u8>;
    /// An error event in the client's format, for a stream that broke after the commit.
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8>;
    /// The whole reply as one object, for a client format that keeps it (a Responses
    /// stream's final response object, stored for `previous_response_id`); taken once, after
    /// [`StreamTranslator::close`] or [`StreamTranslator::error_event`].
    fn take_object(&mut self) -> Option<serde_json::Value> {
        None
    }
    /// The stream's `Content-Type` (a Gemini stream without `alt=sse` is one JSON array).
    fn content_type(&self) -> &'static str {
        "text/event-stream"
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
    fn close(&mut self, usage: Usage) -> Vec<u8> {
        let mut tail = Vec::new();
        if !self.finished() {
            tail.extend_from_slice(&self.synthetic_finish_chunk());
        }
        if self.client_wants_usage() && StreamRewriter::upstream_usage(self).is_none() {
            tail.extend_from_slice(&self.synthetic_usage_chunk(usage));
        }
        tail.extend_from_slice(DONE_EVENT);
        tail
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        sse_event(&err.to_value())
    }
}
