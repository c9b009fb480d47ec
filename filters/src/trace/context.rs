//! W3C Trace Context (`traceparent`, `tracestate`) as a client sends it and as the gateway
//! passes it on, the ratio sampler decided on the trace id, and the span ids of a request's
//! child spans. Whatever a client sends that is not a valid header is ignored (a new trace),
//! never an error: a trace header is a hint, not part of the request.

/// A parsed `traceparent`: the caller's trace and span, and its sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: u128,
    /// The caller's span: the parent of the span that receives the header.
    pub span_id: u64,
    /// The trace flags byte (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

/// Length of a version-00 `traceparent`: `00-{32 hex}-{16 hex}-{2 hex}`.
pub const TRACEPARENT_LEN: usize = 55;

/// Longest `tracestate` passed on (the spec's 32 members of at most 256 characters would allow
/// more; 512 is what implementations are asked to propagate at least).
pub const MAX_TRACESTATE: usize = 512;

/// Parses a `traceparent` header value: version 00 exactly as specified; a later version by its
/// first four fields (the spec's forward-compatible rule), anything after them ignored. `None`
/// for anything else, an all-zero trace or span id, or version `ff`.
pub fn parse_traceparent(value: &[u8]) -> Option<TraceParent> {
    let value = trim(value);
    if value.len() < TRACEPARENT_LEN {
        return None;
    }
    let version = hex_u8(&value[0..2])?;
    if version == 0xff || (version == 0 && value.len() != TRACEPARENT_LEN) {
        return None;
    }
    if version != 0 && value.len() > TRACEPARENT_LEN && value[TRACEPARENT_LEN] != b'-' {
        return None;
    }
    if value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let trace_id = hex_u128(&value[3..35])?;
    let span_id = hex_u64(&value[36..52])?;
    let flags = hex_u8(&value[53..55])?;
    (trace_id != 0 && span_id != 0).then_some(TraceParent {
        trace_id,
        span_id,
        flags,
    })
}

/// A `tracestate` worth passing on: printable ASCII, at most [`MAX_TRACESTATE`] bytes, not
/// empty; `None` drops it (the spec lets a participant drop a header it cannot vouch for).
pub fn valid_tracestate(value: &[u8]) -> Option<&str> {
    let value = trim(value);
    let ok = !value.is_empty()
        && value.len() <= MAX_TRACESTATE
        && value.iter().all(|b| (0x20..0x7f).contains(b));
    ok.then(|| std::str::from_utf8(value).ok()).flatten()
}

/// The `traceparent` value naming `span_id` of `trace_id`, written on the stack.
pub fn format_traceparent(trace_id: u128, span_id: u64, sampled: bool) -> [u8; TRACEPARENT_LEN] {
    let mut out = [b'-'; TRACEPARENT_LEN];
    out[0] = b'0';
    out[1] = b'0';
    write_hex(&mut out[3..35], trace_id);
    write_hex(&mut out[36..52], u128::from(span_id));
    write_hex(&mut out[53..55], u128::from(sampled));
    out
}

/// The threshold [`sampled_by_ratio`] compares with: `ratio` (0 to 1) of the u64 range.
pub fn ratio_threshold(ratio: f64) -> u64 {
    if ratio.is_nan() || ratio <= 0.0 {
        return 0;
    }
    if ratio >= 1.0 {
        return u64::MAX;
    }
    // 2^64 as a float; the product is below it.
    (ratio * 18_446_744_073_709_551_616.0) as u64
}

/// Whether a trace is sampled at the threshold of [`ratio_threshold`], decided on the low 64
/// bits of its id (OpenTelemetry's TraceIdRatioBased rule): every span and every instance that
/// sees the trace decides alike.
pub fn sampled_by_ratio(trace_id: u128, threshold: u64) -> bool {
    threshold == u64::MAX || (trace_id as u64) < threshold
}

/// The span id of a request's child span `tag` (a leg's index + 1, or a fixed tag): derived
/// from the request's own span id, so the id sent upstream in a `traceparent` and the id of
/// the exported span agree without being stored. Never zero.
pub fn child_span_id(server_span: u64, tag: u64) -> u64 {
    // SplitMix64's finaliser: distinct inputs give well-spread, distinct outputs.
    let mut z = server_span ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z.max(1)
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &v[start..end]
}

/// Lower-case hex only, as the spec requires.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

fn hex_u128(s: &[u8]) -> Option<u128> {
    s.iter()
        .try_fold(0u128, |acc, &b| Some(acc << 4 | u128::from(hex_digit(b)?)))
}

fn hex_u64(s: &[u8]) -> Option<u64> {
    hex_u128(s).map(|v| v as u64)
}

fn hex_u8(s: &[u8]) -> Option<u8> {
    hex_u128(s).map(|v| v as u8)
}

fn write_hex(out: &mut [u8], v: u128) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = out.len();
    for (i, o) in out.iter_mut().enumerate() {
        *o = HEX[((v >> ((n - 1 - i) * 4)) & 0xf) as usize];
    }
}
