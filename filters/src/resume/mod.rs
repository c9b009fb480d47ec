//! Streams that survive a cut (README, "Streams that survive a cut"): one client stream made
//! of several upstream legs. [`Seamed`] is the chat-level translator of a stream whose
//! request opted in: it holds the current leg's translator (the one the pair of wire formats
//! would use anyway) and, once a leg broke and another provider continues the answer, writes
//! the new leg's output as the rest of the same stream: the first leg's `id` (and `created`),
//! no second opening (role chunk, `message_start`, the text block's start), the text block's
//! index carried on, the closing usage the sum of every leg.
//!
//! It is the internal stream shape: a Responses stream wraps it like any chat translator, so
//! a Responses client's stream resumes through the same seam. What the client sees of the
//! switch besides the model name (an SSE comment) and which provider continues are the relay's.
//!
//! Only text continues: a stream that delivered a tool call or thinking, or whose upstream
//! said it finished, is not [`resumable`](crate::translator::StreamTranslator::resumable).

pub mod request;
mod seam;

use serde_json::Value;

use crate::cost::Cost;
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::{GatewayError, Usage};

/// The shape of the chat translator's output: what the seam rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// OpenAI chat-completion chunks (an OpenAI, Responses or Gemini client).
    Chat,
    /// Anthropic Messages events (an Anthropic client).
    Messages,
}

/// A chat stream that can continue on another upstream's translator.
pub struct Seamed {
    frame: Frame,
    leg: Box<dyn StreamTranslator>,
    /// Legs before the current one (0: the first leg).
    seams: u32,
    /// The first leg's chunk `id` and `created` as JSON, written on every later chunk.
    id: Option<Value>,
    created: Option<Value>,
    /// Something other than text reached the client (a tool call, thinking): no resume.
    not_text: bool,
    /// Messages: the index of the text block the first leg left open, where the next leg's
    /// blocks start.
    text_index: u64,
    /// Messages: the current leg's first text block was folded into the open one.
    folded: bool,
}

impl Seamed {
    pub fn new(frame: Frame, first: Box<dyn StreamTranslator>) -> Seamed {
        Seamed {
            frame,
            leg: first,
            seams: 0,
            id: None,
            created: None,
            not_text: false,
            text_index: 0,
            folded: false,
        }
    }

    /// Notes what a first leg's output tells the seam: the ids, whether it was all text.
    fn watch(&mut self, out: &[u8]) {
        match self.frame {
            Frame::Chat => {
                if self.id.is_none() {
                    if let Some((id, created)) = seam::chunk_ids(out) {
                        self.id = Some(id);
                        self.created = created;
                    }
                }
                self.not_text |= seam::has_tool_calls(out);
            }
            Frame::Messages => {
                if let Some(found) = seam::block_starts(out) {
                    for (index, ty) in found {
                        match ty.as_str() {
                            "text" => self.text_index = index,
                            _ => self.not_text = true,
                        }
                    }
                }
            }
        }
    }

    /// A later leg's output, as the rest of the first leg's stream.
    fn stitch(&mut self, out: Vec<u8>, total: Option<Usage>) -> Vec<u8> {
        let s = seam::Stitch {
            id: self.id.as_ref(),
            created: self.created.as_ref(),
            text_index: self.text_index,
            total,
        };
        match self.frame {
            Frame::Chat => seam::chat(&out, &s),
            Frame::Messages => seam::messages(&out, &s, &mut self.folded, &mut self.not_text),
        }
    }
}

impl StreamTranslator for Seamed {
    fn on_event(&mut self, event: Option<&str>, data: &str) -> StreamStep {
        match self.leg.on_event(event, data) {
            StreamStep::Emit(out) if self.seams == 0 => {
                self.watch(&out);
                StreamStep::Emit(out)
            }
            StreamStep::Emit(out) => {
                if self.frame == Frame::Chat {
                    self.not_text |= seam::has_tool_calls(&out);
                }
                StreamStep::Emit(self.stitch(out, None))
            }
            step => step,
        }
    }
    fn has_output(&self) -> bool {
        self.leg.has_output()
    }
    fn finished(&self) -> bool {
        self.leg.finished()
    }
    fn upstream_usage(&self) -> Option<Usage> {
        self.leg.upstream_usage()
    }
    /// The current leg's text: each leg is counted on its own.
    fn delivered_text(&self) -> &str {
        self.leg.delivered_text()
    }
    fn end(&mut self, usage: Usage, failure: Option<&GatewayError>) {
        self.leg.end(usage, failure);
    }
    /// `usage` is the whole stream's (every leg's), which the closing usage reports.
    fn close(&mut self, usage: Usage, cost: Option<&Cost>) -> Vec<u8> {
        let out = self.leg.close(usage, cost);
        if self.seams == 0 {
            return out;
        }
        self.stitch(out, Some(usage))
    }
    fn error_event(&mut self, err: &GatewayError) -> Vec<u8> {
        let out = self.leg.error_event(err);
        if self.seams == 0 {
            return out;
        }
        self.stitch(out, None)
    }
    fn resumable(&self) -> bool {
        !self.not_text && !self.leg.finished() && !self.leg.delivered_text().is_empty()
    }
    fn resume(&mut self, next: Box<dyn StreamTranslator>) -> bool {
        // The next leg's text block is folded into the open one; a leg that failed before
        // its first output left nothing the client saw.
        self.folded = false;
        self.leg = next;
        self.seams += 1;
        true
    }
}

#[cfg(test)]
mod tests;
