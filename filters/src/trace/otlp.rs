//! Spans encoded as an OTLP `ExportTraceServiceRequest` in protobuf's binary format (the body
//! of an OTLP/HTTP `POST /v1/traces`), written by hand rather than generated: the handful of
//! messages of opentelemetry-proto's `trace/v1`, `common/v1` and `resource/v1` that spans use,
//! with their field numbers, and nothing of protobuf but its wire format (varints, fixed64,
//! length-delimited fields). `tests_otlp.rs` decodes what this writes with a reader of the wire
//! format written from the specification, on random spans; the integration tests decode it with
//! the official `opentelemetry-proto` package.

use std::borrow::Cow;

/// An attribute's value (OTLP `AnyValue`, of the kinds spans here carry).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// One attribute (OTLP `KeyValue`).
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub key: Cow<'static, str>,
    pub value: Value,
}

impl Attribute {
    pub fn new(key: &'static str, value: Value) -> Attribute {
        Attribute {
            key: Cow::Borrowed(key),
            value,
        }
    }
}

/// A span's kind (OTLP `Span.SpanKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// A span's status code (OTLP `Status.StatusCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCode {
    Unset = 0,
    Ok = 1,
    Error = 2,
}

/// One finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: u128,
    pub span_id: u64,
    /// 0: a root span.
    pub parent_span_id: u64,
    /// The `tracestate` it was called with (empty: none).
    pub trace_state: String,
    pub name: String,
    pub kind: Kind,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: Vec<Attribute>,
    pub status: StatusCode,
    pub status_message: String,
    /// OTLP `Span.flags`: the W3C trace flags in bits 0-7, bit 8 when whether the parent is
    /// remote is known, bit 9 when it is.
    pub flags: u32,
}

/// The body of an OTLP/HTTP traces export: one resource (its attributes, `service.name` among
/// them), one instrumentation scope (`scope`: name and version), the spans.
pub fn export_request(resource: &[Attribute], scope: (&str, &str), spans: &[Span]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(256 + spans.len() * 512);
    // ExportTraceServiceRequest.resource_spans = 1
    message(&mut buf, 1, |b| {
        // ResourceSpans.resource = 1 { Resource.attributes = 1 }
        message(b, 1, |b| {
            for a in resource {
                key_value(b, 1, a);
            }
        });
        // ResourceSpans.scope_spans = 2
        message(b, 2, |b| {
            // ScopeSpans.scope = 1 { name = 1, version = 2 }
            message(b, 1, |b| {
                string(b, 1, scope.0);
                string(b, 2, scope.1);
            });
            for s in spans {
                message(b, 2, |b| span(b, s));
            }
        });
    });
    buf
}

/// `Span`'s fields, by their numbers in `trace.proto`.
fn span(b: &mut Vec<u8>, s: &Span) {
    bytes(b, 1, &s.trace_id.to_be_bytes());
    bytes(b, 2, &s.span_id.to_be_bytes());
    string(b, 3, &s.trace_state);
    if s.parent_span_id != 0 {
        bytes(b, 4, &s.parent_span_id.to_be_bytes());
    }
    string(b, 5, &s.name);
    tag(b, 6, VARINT);
    varint(b, s.kind as u64);
    tag(b, 7, FIXED64);
    b.extend_from_slice(&s.start_unix_nano.to_le_bytes());
    tag(b, 8, FIXED64);
    b.extend_from_slice(&s.end_unix_nano.to_le_bytes());
    for a in &s.attributes {
        key_value(b, 9, a);
    }
    if s.status != StatusCode::Unset || !s.status_message.is_empty() {
        // Span.status = 15 { message = 2, code = 3 }
        message(b, 15, |b| {
            string(b, 2, &s.status_message);
            if s.status != StatusCode::Unset {
                tag(b, 3, VARINT);
                varint(b, s.status as u64);
            }
        });
    }
    if s.flags != 0 {
        tag(b, 16, FIXED32);
        b.extend_from_slice(&s.flags.to_le_bytes());
    }
}

/// A `KeyValue` as field `field`: `key = 1`, `value = 2` (an `AnyValue`, whose one field is
/// written even when it holds its type's zero: it says which type the value is).
fn key_value(b: &mut Vec<u8>, field: u32, a: &Attribute) {
    message(b, field, |b| {
        string(b, 1, &a.key);
        message(b, 2, |b| match &a.value {
            Value::Str(s) => {
                tag(b, 1, LEN);
                varint(b, s.len() as u64);
                b.extend_from_slice(s.as_bytes());
            }
            Value::Bool(v) => {
                tag(b, 2, VARINT);
                varint(b, u64::from(*v));
            }
            // int64: negative values as their two's complement, ten bytes.
            Value::Int(v) => {
                tag(b, 3, VARINT);
                varint(b, *v as u64);
            }
            Value::Double(v) => {
                tag(b, 4, FIXED64);
                b.extend_from_slice(&v.to_le_bytes());
            }
        });
    });
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn tag(b: &mut Vec<u8>, field: u32, wire: u8) {
    varint(b, u64::from(field) << 3 | u64::from(wire));
}

fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// A string field; proto3 leaves an empty one out.
fn string(b: &mut Vec<u8>, field: u32, s: &str) {
    if !s.is_empty() {
        bytes(b, field, s.as_bytes());
    }
}

fn bytes(b: &mut Vec<u8>, field: u32, v: &[u8]) {
    tag(b, field, LEN);
    varint(b, v.len() as u64);
    b.extend_from_slice(v);
}

/// A nested message as field `field`: its body is written in place, then its tag and length
/// are put before it (the length is known only once the body is written).
fn message(b: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let start = b.len();
    body(b);
    let len = b.len() - start;
    let mut head = Vec::with_capacity(8);
    tag(&mut head, field, LEN);
    varint(&mut head, len as u64);
    b.splice(start..start, head);
}
