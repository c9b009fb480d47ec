//! A request's place in a trace, kept in its context from its route to its end: the trace it
//! continues (the client's `traceparent`) or starts, whether it is sampled, and the
//! `traceparent` each upstream attempt and tool call is sent. Nothing here allocates for a
//! request that sent no trace header and is not sampled (one random draw decides it), and
//! nothing at all happens with traces off and no header.

use std::time::Instant;

use tollgate_filters::trace::{
    child_span_id, format_traceparent, parse_traceparent, sampled_by_ratio, valid_tracestate,
    TRACEPARENT_LEN,
};

/// The child span tag of a request's settlement (a leg's is its index + 1).
pub const SETTLEMENT_TAG: u64 = 0xffff_0001;
/// The child span tag of a request's tool call.
pub const TOOL_TAG: u64 = 0xffff_0002;

/// A request's trace.
#[derive(Debug, Default)]
pub struct TraceCtx {
    /// 0: none (no header from the client and not sampled).
    pub trace_id: u128,
    /// The client's span, the parent of the request's; 0: a trace started here.
    pub parent: u64,
    /// The request's own (server) span; 0 with traces off, where a client's header is passed
    /// on as it came.
    pub span_id: u64,
    pub sampled: bool,
    /// The client's `tracestate`, passed on as it came.
    pub state: Option<Box<str>>,
    /// Traces are exported (`[telemetry] otlp_endpoint` is set).
    pub on: bool,
    /// The route's method and path pattern (`http.request.method`, `http.route`).
    pub method: &'static str,
    pub route: &'static str,
    /// The tool call of a `tools/call` request, recorded when its span may be exported.
    pub tool: Option<Box<ToolCall>>,
}

/// What a tool call's span says.
#[derive(Debug)]
pub struct ToolCall {
    pub tool: String,
    pub slug: String,
    /// Its price in whole credits.
    pub price: u64,
    /// `ok`, `upstream_error`, `rpc_error`, `tool_error`.
    pub outcome: &'static str,
    pub start: Instant,
    pub end: Instant,
}

/// The ids a request's spans are exported with.
#[derive(Debug, Clone, Copy)]
pub struct Ids {
    pub trace_id: u128,
    /// The request's own span.
    pub span_id: u64,
    /// The client's span; 0: none.
    pub parent: u64,
}

/// The sampler: `None` with traces off; else the threshold of `[telemetry] sample_ratio`.
#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    pub threshold: u64,
}

impl TraceCtx {
    /// The trace of a request that sent `traceparent` and `tracestate` (either may be absent or
    /// garbage, which is ignored): it continues the client's trace under the client's span and
    /// its sampled flag; else it starts one, sampled at the ratio.
    pub fn begin(
        sampler: Option<Sampler>,
        traceparent: Option<&[u8]>,
        tracestate: Option<&[u8]>,
        (method, route): (&'static str, &'static str),
    ) -> TraceCtx {
        let client = traceparent.and_then(parse_traceparent);
        let mut t = TraceCtx {
            method,
            route,
            on: sampler.is_some(),
            ..TraceCtx::default()
        };
        if let Some(p) = client {
            t.trace_id = p.trace_id;
            t.parent = p.span_id;
            t.sampled = p.sampled();
            t.state = tracestate.and_then(valid_tracestate).map(Box::from);
            if t.on {
                t.span_id = random_id();
            }
            return t;
        }
        let Some(s) = sampler else { return t };
        // The decision is the trace id's low half, drawn first: the rest of the id is drawn
        // only for a sampled request, and the trace-id ratio rule holds for the whole id.
        let low = rand::random::<u64>();
        if sampled_by_ratio(u128::from(low), s.threshold) {
            t.trace_id = u128::from(random_id()) << 64 | u128::from(low);
            t.span_id = random_id();
            t.sampled = true;
        }
        t
    }

    /// The ids its spans are exported with: its own, made up where it has none (an unsampled
    /// request that failed, which is always exported).
    pub fn ids(&self) -> Ids {
        let trace_id = match self.trace_id {
            0 => u128::from(random_id()) << 64 | u128::from(rand::random::<u64>()),
            id => id,
        };
        let span_id = match self.span_id {
            0 => random_id(),
            id => id,
        };
        Ids {
            trace_id,
            span_id,
            parent: self.parent,
        }
    }

    /// The `traceparent` an upstream request is sent for leg `leg` (its span as the parent);
    /// with traces off, the client's own header as it came. `None`: no trace to pass on.
    pub fn upstream(&self, leg: usize) -> Option<[u8; TRACEPARENT_LEN]> {
        self.child(leg as u64 + 1)
    }

    /// The `traceparent` a tool server is sent for the request's tool call.
    pub fn tool_server(&self) -> Option<[u8; TRACEPARENT_LEN]> {
        self.child(TOOL_TAG)
    }

    fn child(&self, tag: u64) -> Option<[u8; TRACEPARENT_LEN]> {
        if self.trace_id == 0 {
            return None;
        }
        let span = match self.span_id {
            0 => self.parent,
            s => child_span_id(s, tag),
        };
        Some(format_traceparent(self.trace_id, span, self.sampled))
    }

    /// Records the request's tool call, when its span may be exported: sampled, or failed
    /// (a failed request is always exported).
    pub fn tool_call(&mut self, call: impl FnOnce() -> ToolCall, failed: bool) {
        if self.on && (self.sampled || failed) {
            self.tool = Some(Box::new(call()));
        }
    }
}

/// A span or trace id half: random, never zero.
fn random_id() -> u64 {
    rand::random::<u64>().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const ROUTE: (&str, &str) = ("POST", "/v1/chat/completions");

    #[test]
    fn a_client_trace_is_continued_under_its_span_and_each_leg_names_its_own() {
        let on = Some(Sampler { threshold: 0 });
        let t = TraceCtx::begin(on, Some(CLIENT), Some(b"k=v"), ROUTE);
        assert_eq!(t.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(t.parent, 0x00f067aa0ba902b7);
        assert!(t.sampled, "the client's flag wins over the ratio");
        assert_eq!(t.state.as_deref(), Some("k=v"));
        let (a, b) = (t.upstream(0).unwrap(), t.upstream(1).unwrap());
        assert_ne!(a, b);
        assert_eq!(a[..36], CLIENT[..36], "same version and trace id");
        // With traces off the client's header goes on as it came.
        let off = TraceCtx::begin(None, Some(CLIENT), None, ROUTE);
        assert_eq!(&off.upstream(0).unwrap()[..], CLIENT);
    }

    #[test]
    fn without_a_header_the_ratio_decides_and_an_unsampled_request_has_no_ids() {
        let never = TraceCtx::begin(Some(Sampler { threshold: 0 }), None, None, ROUTE);
        assert!(!never.sampled && never.trace_id == 0 && never.upstream(0).is_none());
        let always = TraceCtx::begin(
            Some(Sampler {
                threshold: u64::MAX,
            }),
            None,
            None,
            ROUTE,
        );
        assert!(always.sampled && always.trace_id != 0 && always.span_id != 0);
        let garbage = TraceCtx::begin(Some(Sampler { threshold: 0 }), Some(b"junk"), None, ROUTE);
        assert_eq!(garbage.trace_id, 0, "garbage is no header");
        let ids = never.ids();
        assert!(ids.trace_id != 0 && ids.span_id != 0 && ids.parent == 0);
        let off = TraceCtx::begin(None, None, None, ROUTE);
        assert!(off.upstream(0).is_none() && !off.on);
    }
}
