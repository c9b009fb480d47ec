//! The random cases: responses from RFC 9112's grammar, some broken on purpose, and the places
//! the network cuts them.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

pub(super) fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

/// A body with bytes that look like framing, so that a reader scanning for framing is misled.
fn body_bytes(rng: &mut StdRng) -> Vec<u8> {
    const TRICKY: &[&[u8]] = &[
        b"\r\n",
        b"\r\n\r\n",
        b"0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"data: {}\n\n",
        b"\n",
        b"\xff\x00",
    ];
    let n = *pick(rng, &[0, 1, 2, 5, 16, 100, 300]);
    let mut v = Vec::new();
    while v.len() < n {
        if rng.gen_bool(0.2) {
            let piece: &&[u8] = pick(rng, TRICKY);
            v.extend_from_slice(piece);
        } else {
            v.push(rng.gen_range(b' '..=b'~'));
        }
    }
    v.truncate(n);
    v
}

/// A chunk-size line for `n`: either case of hex, leading zeros, extensions.
fn size_line(rng: &mut StdRng, n: usize) -> String {
    let hex = if rng.gen_bool(0.5) {
        format!("{n:x}")
    } else {
        format!("{n:X}")
    };
    let zeros = "0".repeat(if rng.gen_bool(0.2) {
        rng.gen_range(1..4)
    } else {
        0
    });
    let ext = *pick(
        rng,
        &[
            "",
            "",
            "",
            ";ext=1",
            ";name=\"quoted value\"",
            " ;a",
            ";a;b=c",
        ],
    );
    format!("{zeros}{hex}{ext}\r\n")
}

/// `body` in chunks of random sizes, a last chunk and random trailer fields.
fn chunk(rng: &mut StdRng, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = rng.gen_range(1..=rest.len().min(64));
        out.extend_from_slice(size_line(rng, n).as_bytes());
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(size_line(rng, 0).as_bytes());
    for _ in 0..rng.gen_range(0..3) {
        let t = *pick(
            rng,
            &["X-Checksum: abc\r\n", "Server-Timing: total;dur=12\r\n"],
        );
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A response from the grammar: interim heads, a status line, fields in any order and case,
/// a body framed by length, chunks or the close; framing fields that disagree or are invalid;
/// now and then truncated, followed by more bytes, or with one byte changed.
pub(super) fn response(rng: &mut StdRng) -> Vec<u8> {
    let mut out = interim_heads(rng);
    out.extend_from_slice(status_line(rng).as_bytes());
    let mut fields = other_fields(rng);
    let body = body_bytes(rng);
    let wire = framed_body(rng, body, &mut fields);
    fields.shuffle(rng);
    for f in fields {
        out.extend_from_slice(f.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&wire);
    damage(rng, &mut out);
    out
}

/// Interim (1xx) heads, none or more.
fn interim_heads(rng: &mut StdRng) -> Vec<u8> {
    const INTERIM: &[&str] = &[
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 102 Processing\r\n\r\n",
        "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    ];
    let mut out = Vec::new();
    while rng.gen_bool(0.25) {
        out.extend_from_slice(pick(rng, INTERIM).as_bytes());
    }
    out
}

/// The final head's status line: HTTP/1.1 or 1.0, statuses with and without a body, any reason
/// phrase or none.
fn status_line(rng: &mut StdRng) -> String {
    let version = if rng.gen_bool(0.9) {
        "HTTP/1.1"
    } else {
        "HTTP/1.0"
    };
    let status = *pick(
        rng,
        &[200, 200, 200, 201, 204, 304, 400, 404, 429, 500, 503, 101],
    );
    let reason = *pick(rng, &[" OK", " ", "", " Whatever It Says"]);
    format!("{version} {status}{reason}\r\n")
}

/// Fields other than the framing: ordinary ones, and now and then a `Connection` field.
fn other_fields(rng: &mut StdRng) -> Vec<String> {
    const FIELDS: &[&str] = &[
        "Content-Type: application/json",
        "content-type: text/event-stream",
        "X-Request-Id: req_123",
        "Server: nginx",
        "Mcp-Session-Id: abc",
        "X-Empty:",
        "X-Spaced:   padded   ",
        "Date: Tue, 15 Nov 1994 08:12:31 GMT",
    ];
    const CONNECTION: &[&str] = &[
        "Connection: close",
        "Connection: keep-alive",
        "connection: Keep-Alive, CLOSE",
        "Connection: closed",
        "Connection: upgrade",
    ];
    let mut fields: Vec<String> = (0..rng.gen_range(0..4))
        .map(|_| pick(rng, FIELDS).to_string())
        .collect();
    if rng.gen_bool(0.25) {
        fields.push(pick(rng, CONNECTION).to_string());
    }
    fields
}

/// `body` as sent, with the framing fields that say how (added to `fields`): by length, in
/// chunks, to the close, by fields that are invalid or disagree, or by a wrong length.
fn framed_body(rng: &mut StdRng, body: Vec<u8>, fields: &mut Vec<String>) -> Vec<u8> {
    let n = body.len();
    match rng.gen_range(0..10) {
        0..=2 => {
            let name = *pick(rng, &["Content-Length", "content-length", "CONTENT-LENGTH"]);
            fields.push(format!("{name}: {n}"));
            if rng.gen_bool(0.1) {
                fields.push(format!("Content-Length: {n}"));
            }
            body
        }
        3..=5 => {
            let coding = *pick(
                rng,
                &[
                    "chunked",
                    "chunked",
                    "Chunked",
                    "CHUNKED",
                    "gzip, chunked",
                    " chunked ",
                    "gzip,chunked",
                ],
            );
            fields.push(format!("Transfer-Encoding: {coding}"));
            chunk(rng, &body)
        }
        6 => body,
        7 => odd_framing(rng, body, fields),
        _ => {
            // A length that does not match the bytes sent.
            let off = n as i64 + rng.gen_range(-3..=3);
            fields.push(format!("Content-Length: {}", off.max(0)));
            body
        }
    }
}

/// Framing fields that are invalid, repeated with other values, or both framings at once; the
/// body chunked (mostly) when one of them names `chunked`.
fn odd_framing(rng: &mut StdRng, body: Vec<u8>, fields: &mut Vec<String>) -> Vec<u8> {
    let n = body.len();
    let odd = [
        format!("Content-Length: +{n}"),
        format!("Content-Length: {n} "),
        format!("Content-Length: 0{n}"),
        format!("Content-Length: {n}, {n}"),
        format!("Content-Length: -{n}"),
        "Content-Length:".into(),
        "Content-Length: 99999999999999999999".into(),
        format!("Content-Length: {n}\r\nContent-Length: {}", n + 1),
        "Transfer-Encoding: gzip".into(),
        "Transfer-Encoding: chunked, gzip".into(),
        "Transfer-Encoding: xchunked".into(),
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked".into(),
        "Transfer-Encoding: chunked\r\nTransfer-Encoding:".into(),
        format!("Transfer-Encoding: chunked\r\nContent-Length: {n}"),
    ];
    let field = pick(rng, &odd).clone();
    let chunks = field.contains("chunked") && rng.gen_bool(0.7);
    fields.push(field);
    if chunks {
        chunk(rng, &body)
    } else {
        body
    }
}

/// Now and then the whole response spoiled: truncated, followed by more bytes, or one byte
/// changed.
fn damage(rng: &mut StdRng, out: &mut Vec<u8>) {
    match rng.gen_range(0..20) {
        0..=1 => out.truncate(rng.gen_range(0..=out.len())),
        2 => out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        3 => out.extend_from_slice(b"\r\n"),
        4 if !out.is_empty() => {
            let i = rng.gen_range(0..out.len());
            out[i] = *pick(rng, b"\r\n:; 0aZ\x00\xff");
        }
        _ => {}
    }
}

/// Random cuts: none, one, several, or every byte.
pub(super) fn random_cuts(rng: &mut StdRng, len: usize) -> Vec<usize> {
    if len < 2 {
        return Vec::new();
    }
    let mut cuts: Vec<usize> = match rng.gen_range(0..4) {
        0 => Vec::new(),
        1 => vec![rng.gen_range(1..len)],
        2 => (0..rng.gen_range(2..10))
            .map(|_| rng.gen_range(1..len))
            .collect(),
        _ => (1..len).collect(),
    };
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}
