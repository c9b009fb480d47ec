//! Criterion benches of the I/O-free pipeline: SSE decoding (MB/s with realistic chunk
//! sizes), stream rewriting, request validation and rewrite, route candidates, tokenizer
//! fallback.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::json;
use tollgate_filters::openai::request::{parse_chat_request, upstream_body};
use tollgate_filters::openai::stream::{StreamRewriter, StreamStep};
use tollgate_filters::route::{Catalog, ModelSpec, Target, Tier};
use tollgate_filters::sse::SseDecoder;
use tollgate_filters::tokens;

fn sse_stream(chunks: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..chunks {
        s.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-123\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token{i} \"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn bench_sse(c: &mut Criterion) {
    let stream = sse_stream(500);
    let mut g = c.benchmark_group("sse_decode");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    // Upstreams deliver from a few bytes to a TCP segment at a time.
    for piece in [64usize, 1460, 16 * 1024] {
        g.bench_function(format!("pieces_of_{piece}"), |b| {
            b.iter(|| {
                let mut d = SseDecoder::new(1 << 20);
                let mut out = Vec::with_capacity(16);
                let mut n = 0;
                for p in stream.chunks(piece) {
                    d.push(p, &mut out).unwrap();
                    n += out.len();
                    out.clear();
                }
                black_box(n)
            })
        });
    }
    g.finish();

    let mut d = SseDecoder::new(1 << 20);
    let mut events = Vec::new();
    d.push(&stream, &mut events).unwrap();
    let mut g = c.benchmark_group("stream_rewrite");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("500_chunks", |b| {
        b.iter(|| {
            let mut r = StreamRewriter::new("gpt-4o-mini-2024-07-18", false);
            let mut bytes = 0;
            for e in &events {
                if let StreamStep::Emit(v) = r.on_event(&e.data) {
                    bytes += v.len();
                }
            }
            black_box(bytes)
        })
    });
    g.finish();
}

fn bench_validate(c: &mut Criterion) {
    let body = serde_json::to_vec(&json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Summarise the following text. ".repeat(40)},
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "Thanks, now in French."}
        ],
        "temperature": 0.7, "max_tokens": 256, "stream": true,
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    }))
    .unwrap();
    c.bench_function("validate_and_rewrite_request", |b| {
        b.iter(|| {
            let req = parse_chat_request(black_box(&body)).unwrap();
            black_box(upstream_body(&req, "gpt-4o-mini-2024-07-18", Some(256)))
        })
    });
    // A long conversation (about 100 KB): the part of the cost that grows with the body.
    let turns: Vec<_> = (0..200)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": "Lorem ipsum dolor sit amet, consectetur. ".repeat(12)})
        })
        .collect();
    let long =
        serde_json::to_vec(&json!({"model": "gpt-4o-mini", "stream": true, "messages": turns}))
            .unwrap();
    c.bench_function("validate_and_rewrite_request_100k", |b| {
        b.iter(|| {
            let req = parse_chat_request(black_box(&long)).unwrap();
            black_box(upstream_body(&req, "gpt-4o-mini-2024-07-18", Some(256)))
        })
    });
}

fn catalog(n: usize) -> Catalog {
    let models = (0..n)
        .map(|i| ModelSpec {
            id: format!("model-{i}"),
            kind: tollgate_filters::route::ModelKind::Chat,
            provider: format!("p{}", i % 5),
            upstream_model: format!("m{i}"),
            tier: Tier::ALL[i % 3],
            input_micros_per_1k: 1,
            output_micros_per_1k: 2,
            cache_read_micros_per_1k: None,
            cache_write_micros_per_1k: None,
            cache_write_1h_micros_per_1k: None,
            max_output_tokens: 1000,
            completions: false,
            cache_breakpoints: false,
            guest: false,
            self_hosted: i == n - 1,
            demo: false,
            deprecated_at: None,
            retires_at: None,
            replacement: None,
        })
        .collect();
    Catalog::new(models, vec![("alias".into(), "model-3".into())])
}

fn bench_route(c: &mut Criterion) {
    let cat = catalog(30);
    c.bench_function("route_resolve_and_plan_30_models", |b| {
        b.iter(|| {
            let r = cat.resolve(black_box("alias"), 1_800_000_000).unwrap();
            black_box(cat.candidates(r.target, 1_800_000_000, false, |m| m.provider != "p2"))
        })
    });
    c.bench_function("route_plan_tier", |b| {
        b.iter(|| black_box(cat.candidates(Target::Tier(Tier::Normal), 0, false, |_| true)))
    });
}

fn bench_tokens(c: &mut Criterion) {
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(110); // about 1K tokens
    let n = tokens::count_text(&text);
    let mut g = c.benchmark_group("tokenizer_fallback");
    g.throughput(Throughput::Elements(n));
    g.bench_function("count_1k_tokens", |b| {
        b.iter_batched(
            || text.clone(),
            |t| black_box(tokens::count_text(&t)),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_sse,
    bench_validate,
    bench_route,
    bench_tokens
);
criterion_main!(benches);
