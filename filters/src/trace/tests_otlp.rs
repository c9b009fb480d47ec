//! Property tests of the OTLP encoder: random spans (ids, names of any UTF-8, every kind of
//! value, extreme numbers) are encoded, then read back by a reader of protobuf's wire format
//! written here from the specification (tag = field << 3 | wire type; varints of 7 bits, least
//! significant group first; fixed64/fixed32 little-endian; length-delimited fields), and what
//! it reads must be the spans. Seeded; a failing case prints its seed, which
//! `TOLLGATE_PROP_SEED` replays.

use std::borrow::Cow;

use super::otlp::*;

/// One field as the wire format has it.
#[derive(Debug, Clone)]
enum Field {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(Vec<u8>),
}

/// Reads a message into its fields in order; panics on anything malformed (a test failure).
fn fields(mut b: &[u8]) -> Vec<(u32, Field)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let (first, rest) = b.split_first().expect("varint cut short");
            *b = rest;
            v |= u64::from(first & 0x7f) << shift;
            if first & 0x80 == 0 {
                return v;
            }
        }
        panic!("varint longer than ten bytes");
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let (field, wire) = ((key >> 3) as u32, key & 7);
        assert!(field > 0, "field 0");
        let f = match wire {
            0 => Field::Varint(varint(&mut b)),
            1 => {
                let (v, rest) = b.split_at(8);
                b = rest;
                Field::Fixed64(u64::from_le_bytes(v.try_into().unwrap()))
            }
            2 => {
                let n = varint(&mut b) as usize;
                let (v, rest) = b.split_at(n);
                b = rest;
                Field::Len(v.to_vec())
            }
            5 => {
                let (v, rest) = b.split_at(4);
                b = rest;
                Field::Fixed32(u32::from_le_bytes(v.try_into().unwrap()))
            }
            w => panic!("wire type {w}"),
        };
        out.push((field, f));
    }
    out
}

fn len(f: &Field) -> &[u8] {
    match f {
        Field::Len(v) => v,
        other => panic!("expected a length-delimited field, got {other:?}"),
    }
}

fn text(f: &Field) -> String {
    String::from_utf8(len(f).to_vec()).expect("UTF-8")
}

fn attribute(b: &[u8]) -> Attribute {
    let fs = fields(b);
    let key = fs
        .iter()
        .find(|(n, _)| *n == 1)
        .map_or(String::new(), |(_, f)| text(f));
    let any = fs.iter().find(|(n, _)| *n == 2).expect("a value");
    let v = fields(len(&any.1));
    assert_eq!(v.len(), 1, "one AnyValue field: {v:?}");
    let value = match &v[0] {
        (1, f) => Value::Str(text(f)),
        (2, Field::Varint(x)) => Value::Bool(*x != 0),
        (3, Field::Varint(x)) => Value::Int(*x as i64),
        (4, Field::Fixed64(x)) => Value::Double(f64::from_bits(*x)),
        other => panic!("AnyValue {other:?}"),
    };
    Attribute {
        key: Cow::Owned(key),
        value,
    }
}

fn span(b: &[u8]) -> Span {
    let mut s = Span {
        trace_id: 0,
        span_id: 0,
        parent_span_id: 0,
        trace_state: String::new(),
        name: String::new(),
        kind: Kind::Internal,
        start_unix_nano: 0,
        end_unix_nano: 0,
        attributes: Vec::new(),
        status: StatusCode::Unset,
        status_message: String::new(),
        flags: 0,
    };
    for (n, f) in fields(b) {
        match (n, &f) {
            (1, _) => s.trace_id = u128::from_be_bytes(len(&f).try_into().unwrap()),
            (2, _) => s.span_id = u64::from_be_bytes(len(&f).try_into().unwrap()),
            (3, _) => s.trace_state = text(&f),
            (4, _) => s.parent_span_id = u64::from_be_bytes(len(&f).try_into().unwrap()),
            (5, _) => s.name = text(&f),
            (6, Field::Varint(k)) => {
                s.kind = match k {
                    1 => Kind::Internal,
                    2 => Kind::Server,
                    3 => Kind::Client,
                    k => panic!("kind {k}"),
                }
            }
            (7, Field::Fixed64(t)) => s.start_unix_nano = *t,
            (8, Field::Fixed64(t)) => s.end_unix_nano = *t,
            (9, _) => s.attributes.push(attribute(len(&f))),
            (15, _) => {
                for (m, g) in fields(len(&f)) {
                    match (m, &g) {
                        (2, _) => s.status_message = text(&g),
                        (3, Field::Varint(1)) => s.status = StatusCode::Ok,
                        (3, Field::Varint(2)) => s.status = StatusCode::Error,
                        other => panic!("status {other:?}"),
                    }
                }
            }
            (16, Field::Fixed32(x)) => s.flags = *x,
            other => panic!("span field {other:?}"),
        }
    }
    s
}

/// The request read back: resource attributes, scope (name, version), spans.
fn read(b: &[u8]) -> (Vec<Attribute>, (String, String), Vec<Span>) {
    let top = fields(b);
    assert_eq!(top.len(), 1, "one ResourceSpans");
    assert_eq!(top[0].0, 1);
    let rs = fields(len(&top[0].1));
    let (mut resource, mut scope, mut spans) = (Vec::new(), Default::default(), Vec::new());
    for (n, f) in rs {
        match n {
            1 => {
                resource = fields(len(&f))
                    .iter()
                    .map(|(m, a)| {
                        assert_eq!(*m, 1);
                        attribute(len(a))
                    })
                    .collect()
            }
            2 => {
                for (m, g) in fields(len(&f)) {
                    match m {
                        1 => {
                            let sc = fields(len(&g));
                            let get = |k| {
                                sc.iter()
                                    .find(|(n, _)| *n == k)
                                    .map_or(String::new(), |(_, f)| text(f))
                            };
                            scope = (get(1), get(2));
                        }
                        2 => spans.push(span(len(&g))),
                        m => panic!("scope spans field {m}"),
                    }
                }
            }
            n => panic!("resource spans field {n}"),
        }
    }
    (resource, scope, spans)
}

/// xorshift64*: small, seeded, enough to pick cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// A number, often at an edge (0, 1, a varint boundary, the type's extremes).
    fn edgy(&mut self) -> u64 {
        const EDGES: [u64; 8] = [0, 1, 127, 128, 16_383, 16_384, u64::MAX, 1 << 63];
        match self.below(3) {
            0 => EDGES[self.below(8) as usize],
            _ => self.next() >> self.below(64),
        }
    }
    fn text(&mut self, max: u64) -> String {
        const PIECES: [&str; 8] = ["a", "gen_ai.", "é", "漢", "🦀", "\0", "\"", " "];
        (0..self.below(max + 1))
            .map(|_| PIECES[self.below(8) as usize])
            .collect()
    }
    fn value(&mut self) -> Value {
        match self.below(4) {
            0 => Value::Str(self.text(40)),
            1 => Value::Int(self.edgy() as i64),
            2 => {
                // Finite only: a NaN would not compare equal to itself once read back.
                let d = f64::from_bits(self.edgy());
                Value::Double(if d.is_nan() {
                    0.0
                } else {
                    d.clamp(-1e300, 1e300)
                })
            }
            _ => Value::Bool(self.below(2) == 1),
        }
    }
    fn attributes(&mut self, max: u64) -> Vec<Attribute> {
        (0..self.below(max + 1))
            .map(|_| Attribute {
                key: Cow::Owned(self.text(12)),
                value: self.value(),
            })
            .collect()
    }
    fn span(&mut self) -> Span {
        let status = [StatusCode::Unset, StatusCode::Ok, StatusCode::Error][self.below(3) as usize];
        Span {
            trace_id: u128::from(self.edgy()) << 64 | u128::from(self.edgy()),
            span_id: self.edgy(),
            parent_span_id: self.edgy(),
            trace_state: self.text(6),
            name: self.text(20),
            kind: [Kind::Internal, Kind::Server, Kind::Client][self.below(3) as usize],
            start_unix_nano: self.edgy(),
            end_unix_nano: self.edgy(),
            attributes: self.attributes(30),
            status,
            status_message: self.text(5),
            flags: self.edgy() as u32,
        }
    }
}

/// A double that is NaN compares unequal to itself; the cases use none (see `value`).
#[test]
fn random_spans_read_back_as_they_were_written() {
    let seed = std::env::var("TOLLGATE_PROP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5e_ed0f_7ace);
    let cases = std::env::var("TOLLGATE_PROP_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    for case in 0..cases {
        let case_seed = seed ^ (case as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rng = Rng(case_seed);
        let resource = rng.attributes(5);
        let scope = (rng.text(8), rng.text(4));
        let spans: Vec<Span> = (0..rng.below(12)).map(|_| rng.span()).collect();
        let body = export_request(&resource, (&scope.0, &scope.1), &spans);
        let (r, s, sp) = read(&body);
        assert_eq!(r, resource, "resource, seed {case_seed}");
        assert_eq!(s, scope, "scope, seed {case_seed}");
        assert_eq!(sp, spans, "spans, seed {case_seed}");
    }
}

#[test]
fn a_known_span_has_the_bytes_protobuf_gives_it() {
    // Checked by hand against protobuf's encoding rules: span_id = 2 (bytes), name = 5
    // (string), kind = 6 (varint), start = 7 and end = 8 (fixed64), one int attribute.
    let s = Span {
        trace_id: 1,
        span_id: 2,
        parent_span_id: 0,
        trace_state: String::new(),
        name: "x".into(),
        kind: Kind::Server,
        start_unix_nano: 3,
        end_unix_nano: 4,
        attributes: vec![Attribute::new("k", Value::Int(-1))],
        status: StatusCode::Unset,
        status_message: String::new(),
        flags: 0,
    };
    let body = export_request(&[], ("", ""), &[s]);
    let mut want = vec![0x0a];
    let mut span = vec![0x0a, 16];
    span.extend_from_slice(&1u128.to_be_bytes());
    span.extend_from_slice(&[0x12, 8, 0, 0, 0, 0, 0, 0, 0, 2]);
    span.extend_from_slice(&[0x2a, 1, b'x', 0x30, 2]);
    span.extend_from_slice(&[0x39, 3, 0, 0, 0, 0, 0, 0, 0, 0x41, 4, 0, 0, 0, 0, 0, 0, 0]);
    // KeyValue { key "k", value AnyValue { int_value = -1: ten bytes } }
    let any = [
        0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ];
    let mut kv = vec![0x0a, 1, b'k', 0x12, any.len() as u8];
    kv.extend_from_slice(&any);
    span.push(0x4a);
    span.push(kv.len() as u8);
    span.extend_from_slice(&kv);
    // ScopeSpans { scope {} , spans [span] }
    let mut scope_spans = vec![0x0a, 0, 0x12, span.len() as u8];
    scope_spans.extend_from_slice(&span);
    // ResourceSpans { resource {}, scope_spans }
    let mut rs = vec![0x0a, 0, 0x12, scope_spans.len() as u8];
    rs.extend_from_slice(&scope_spans);
    want.push(rs.len() as u8);
    want.extend_from_slice(&rs);
    assert_eq!(body, want);
}
