//! Traces without I/O: W3C Trace Context as clients send it and upstreams get it, the ratio
//! sampler and child span ids ([`context`]), and spans encoded for an OTLP/HTTP collector
//! ([`otlp`]).

pub mod context;
pub mod otlp;
#[cfg(test)]
mod tests_context;
#[cfg(test)]
mod tests_otlp;

pub use context::{
    child_span_id, format_traceparent, parse_traceparent, ratio_threshold, sampled_by_ratio,
    valid_tracestate, TraceParent, TRACEPARENT_LEN,
};
pub use otlp::{export_request, Attribute, Kind, Span, StatusCode, Value};
