//! Property tests of the response framing (`wire`, `chunked`, `idle`): responses written from
//! RFC 9112's grammar, some broken on purpose, are read by `wire::exchange` from a connection
//! that hands them over cut at chosen places, and what it makes of them is compared with what
//! a reader of the whole bytes says: httparse for the heads (the parser the exchange uses, here
//! on bytes no network cut) and the RFC's framing rules, written out plainly, for the bodies.
//! How the network cuts a response must never change the answer: every byte boundary of fixed
//! responses, every truncation of them, and random cuts of random ones. The random cases are
//! seeded; a failing case prints its seed, and `TOLLGATE_PROP_SEED` (with
//! `TOLLGATE_PROP_CASES=1`) replays it.
//!
//! The properties are here; what they stand on beside them: the scripted connection
//! ([`scripted`]), the bench that runs a case on it and compares ([`bench`]), the reader of
//! whole bytes ([`oracle`]) and the random cases ([`generate`]).

mod bench;
mod generate;
mod oracle;
mod scripted;

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::chunked::{MAX_CHUNK_LINE, MAX_HEAD};
use super::wire::MAX_HEADERS;
use bench::Bench;
use generate::{pick, random_cuts, response};
use oracle::{expect, Seen};
use scripted::End;

/// Responses whose every byte boundary is tried.
const SAMPLES: &[&[u8]] = &[
    // Chunked, with a chunk extension, upper-case hex and a trailer field.
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\n",
    // Content-Length, a body that looks like framing.
    b"HTTP/1.1 200 OK\r\ncontent-length: 22\r\nMcp-Session-Id: abc\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n",
    // Interim heads before the final one.
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    // No body, kept alive.
    b"HTTP/1.1 204 No Content\r\nX-Request-Id: r1\r\n\r\n",
    // HTTP/1.0: read by its length, not kept.
    b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nabcd",
    // Read to the close.
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}\r\n",
    // Both framings: the coding wins, the connection is not kept.
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
    // `Connection: close` on a framed body.
    b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",
];

/// Whether a truncated `sample` must fail: its body is framed (a length or chunks), so a close
/// before its end is never a whole body.
fn framed(sample: &[u8]) -> bool {
    let text = String::from_utf8_lossy(sample).to_ascii_lowercase();
    text.contains("content-length") || text.contains("chunked") || text.contains(" 204 ")
}

#[tokio::test]
async fn every_cut_of_a_response_reads_as_the_whole_response() {
    let bench = Bench::new();
    let mut runs = 0;
    for &sample in SAMPLES {
        let every: Vec<usize> = (1..sample.len()).collect();
        let mut cases: Vec<Vec<usize>> = every.iter().map(|&k| vec![k]).collect();
        cases.push(Vec::new());
        cases.push(every.clone());
        for cuts in &cases {
            for end in [End::Hang, End::Close, End::Reset] {
                let ran = bench.check(sample, cuts, end).await.unwrap();
                runs += usize::from(ran);
            }
        }
        // Every response here is whole: the reader must say so, and keep the connection
        // when the peer does and the framing allows.
        let (whole, _) = expect(sample, End::Close).unwrap();
        assert!(
            matches!(whole, Seen::Answer { body: Some(_), .. }),
            "{whole:?}"
        );
    }
    assert!(runs > 1500, "{runs}");
}

#[tokio::test]
async fn a_response_cut_short_by_a_close_is_an_error_never_a_short_body() {
    let bench = Bench::new();
    for &sample in SAMPLES {
        for t in 0..sample.len() {
            let short = &sample[..t];
            let every: Vec<usize> = (1..t).collect();
            for cuts in [&[][..], &every[..], &[t / 2][..]] {
                for end in [End::Close, End::Reset] {
                    let (want, names) = expect(short, end).unwrap();
                    let seen = bench.run(short, cuts, end, &names).await;
                    let ctx = || {
                        format!(
                            "{:?} cut at {cuts:?} then {end:?}",
                            String::from_utf8_lossy(short)
                        )
                    };
                    assert_eq!(seen, want, "{}", ctx());
                    if framed(sample) {
                        assert!(
                            !matches!(seen, Seen::Answer { body: Some(_), .. }),
                            "a truncated framed body read as whole: {}",
                            ctx()
                        );
                    }
                    // An answer that began (an interim head included) is never sent again.
                    if t > 0 {
                        assert_ne!(seen, Seen::Failed { retried: true }, "{}", ctx());
                    }
                }
            }
        }
    }
}

/// A response `head_len` bytes long up to its empty line, padded by one long field.
fn head_of(head_len: usize, interim: &[u8]) -> Vec<u8> {
    let start = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Filler: ";
    let pad = head_len - start.len() - 4;
    let mut v = interim.to_vec();
    v.extend_from_slice(start);
    v.extend(std::iter::repeat_n(b'a', pad));
    v.extend_from_slice(b"\r\n\r\nok");
    v
}

/// Cuts around each of `marks` (every position within `by` of it), one at a time.
fn cuts_around(marks: &[usize], by: usize, len: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for &m in marks {
        for k in m.saturating_sub(by)..=(m + by).min(len - 1) {
            if k > 0 {
                out.push(vec![k]);
            }
        }
    }
    out
}

#[tokio::test]
async fn oversize_heads_are_refused_however_they_arrive() {
    let bench = Bench::new();
    let interim: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    for before in [&b""[..], interim] {
        for len in [
            MAX_HEAD - 100,
            MAX_HEAD - 1,
            MAX_HEAD,
            MAX_HEAD + 1,
            MAX_HEAD + 2,
        ] {
            let head_len = len - before.len();
            let bytes = head_of(head_len, before);
            let marks = [MAX_HEAD, len, before.len(), 4096];
            for cuts in cuts_around(&marks, 3, bytes.len()) {
                for end in [End::Hang, End::Close] {
                    bench.check(&bytes, &cuts, end).await.unwrap();
                    let seen = bench.run(&bytes, &cuts, end, &[]).await;
                    let fits = len <= MAX_HEAD;
                    assert_eq!(
                        matches!(seen, Seen::Answer { status: 200, .. }),
                        fits,
                        "heads of {len} bytes ({} interim) cut at {cuts:?}: {seen:?}",
                        before.len()
                    );
                }
            }
        }
    }
    // Fields past the count the exchange reads are refused as well.
    for n in [MAX_HEADERS - 1, MAX_HEADERS, MAX_HEADERS + 1] {
        let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n".to_vec();
        for i in 1..n {
            bytes.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
        }
        bytes.extend_from_slice(b"\r\n");
        let mut all = vec![Vec::new()];
        all.extend((1..bytes.len()).step_by(7).map(|k| vec![k]));
        for cuts in all {
            bench.check(&bytes, &cuts, End::Hang).await.unwrap();
        }
        let seen = bench.run(&bytes, &[], End::Hang, &[]).await;
        assert_eq!(matches!(seen, Seen::Answer { .. }), n <= MAX_HEADERS, "{n}");
    }
}

#[tokio::test]
async fn oversize_chunk_size_lines_and_trailers_are_refused_however_they_arrive() {
    let bench = Bench::new();
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    // A size line of `len` bytes: `5;x=aaa...\r\n`.
    for len in [
        MAX_CHUNK_LINE - 1,
        MAX_CHUNK_LINE,
        MAX_CHUNK_LINE + 1,
        MAX_CHUNK_LINE + 2,
    ] {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(b"5;x=");
        bytes.extend(std::iter::repeat_n(b'a', len - 6));
        bytes.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
        let line_end = head.len() + len;
        let marks = [line_end, head.len() + MAX_CHUNK_LINE, head.len()];
        for cuts in cuts_around(&marks, 3, bytes.len()) {
            for end in [End::Hang, End::Close] {
                bench.check(&bytes, &cuts, end).await.unwrap();
                let seen = bench.run(&bytes, &cuts, end, &[]).await;
                let whole = matches!(&seen, Seen::Answer { body: Some(b), .. } if b == b"hello");
                assert_eq!(whole, len <= MAX_CHUNK_LINE, "{len}, {cuts:?}: {seen:?}");
            }
        }
    }
    // Trailers of `len` bytes, their empty line included.
    for len in [MAX_HEAD - 1, MAX_HEAD, MAX_HEAD + 1] {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(b"2\r\nok\r\n0\r\nX-Pad: ");
        let at = bytes.len() - "X-Pad: ".len();
        bytes.extend(std::iter::repeat_n(b'a', len - "X-Pad: ".len() - 4));
        bytes.extend_from_slice(b"\r\n\r\n");
        let marks = [at + MAX_HEAD, at + len, at];
        for cuts in cuts_around(&marks, 2, bytes.len()) {
            bench.check(&bytes, &cuts, End::Hang).await.unwrap();
            let seen = bench.run(&bytes, &cuts, End::Hang, &[]).await;
            let whole =
                matches!(&seen, Seen::Answer { body: Some(b), reused: true, .. } if b == b"ok");
            assert_eq!(whole, len <= MAX_HEAD, "{len}, {cuts:?}: {seen:?}");
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn random_responses_cut_at_random_read_as_the_whole_bytes_say() {
    let bench = Bench::new();
    let base = env_number("TOLLGATE_PROP_SEED").unwrap_or_else(rand::random);
    let cases = env_number("TOLLGATE_PROP_CASES").unwrap_or(3000);
    let (mut answers, mut reused, mut failed) = (0, 0, 0);
    for i in 0..cases {
        let seed = base.wrapping_add(i);
        let mut rng = StdRng::seed_from_u64(seed);
        let bytes = response(&mut rng);
        let cuts = random_cuts(&mut rng, bytes.len());
        let mut end = *pick(&mut rng, &[End::Hang, End::Close, End::Reset]);
        if expect(&bytes, end).is_none() {
            end = End::Close;
        }
        if let Err(e) = bench.check(&bytes, &cuts, end).await {
            panic!("{e}\nreplay: TOLLGATE_PROP_SEED={seed} TOLLGATE_PROP_CASES=1");
        }
        match expect(&bytes, end) {
            Some((Seen::Answer { reused: true, .. }, _)) => reused += 1,
            Some((Seen::Answer { .. }, _)) => answers += 1,
            _ => failed += 1,
        }
    }
    eprintln!(
        "seed {base}: {cases} cases, {reused} kept, {answers} other answers, {failed} failed"
    );
    // The generator reaches every outcome, or the comparison proves little.
    if cases >= 1000 {
        assert!(
            reused > cases / 25 && answers > cases / 10 && failed > cases / 25,
            "reused {reused}, other answers {answers}, failures {failed} (seed {base})"
        );
    }
}
