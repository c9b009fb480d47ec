//! Criterion benches of the Anthropic translations, each beside the OpenAI → OpenAI path it is
//! compared with in the same run: stream events per second through each translator (500 text
//! deltas), and one request and one reply each way.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use tollgate_filters::anthropic::completion::{completion_to_message, message_to_completion};
use tollgate_filters::anthropic::request::{openai_to_messages, parse_messages_request};
use tollgate_filters::anthropic::stream::{FromOpenAi, Passthrough, ToOpenAi};
use tollgate_filters::openai::completion::rewrite_completion;
use tollgate_filters::openai::request::{parse_chat_request, upstream_body};
use tollgate_filters::openai::stream::{StreamRewriter, StreamStep};
use tollgate_filters::sse::{SseDecoder, SseEvent};
use tollgate_filters::translator::StreamTranslator;
use tollgate_filters::Usage;

const CHUNKS: usize = 500;

fn decode(raw: &str) -> Vec<SseEvent> {
    let mut d = SseDecoder::new(1 << 20);
    let mut out = Vec::new();
    d.push(raw.as_bytes(), &mut out).unwrap();
    out
}

fn openai_stream() -> Vec<SseEvent> {
    let mut s = String::from("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n");
    for i in 0..CHUNKS {
        s.push_str(&format!("data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token{i} \"}},\"finish_reason\":null}}]}}\n\n"));
    }
    s.push_str("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    decode(&s)
}

fn anthropic_stream() -> Vec<SseEvent> {
    let mut s = String::from("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    for i in 0..CHUNKS {
        s.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"token{i} \"}}}}\n\n"));
    }
    s.push_str("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":500}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    decode(&s)
}

fn run(t: &mut dyn StreamTranslator, events: &[SseEvent]) -> usize {
    let mut bytes = 0;
    for e in events {
        if let StreamStep::Emit(v) = t.on_event(e.event.as_deref(), &e.data) {
            bytes += v.len();
        }
    }
    bytes + t.close(Usage::default(), None).len()
}

fn bench_streams(c: &mut Criterion) {
    let (oai, anth) = (openai_stream(), anthropic_stream());
    let mut g = c.benchmark_group("stream_translate");
    g.throughput(Throughput::Elements(CHUNKS as u64));
    g.bench_function("openai_to_openai", |b| {
        b.iter(|| black_box(run(&mut StreamRewriter::new("m-2024-01-01", false), &oai)))
    });
    g.bench_function("anthropic_to_openai", |b| {
        b.iter(|| {
            black_box(run(
                &mut ToOpenAi::new("m-2024-01-01", false, 1_700_000_000),
                &anth,
            ))
        })
    });
    g.bench_function("anthropic_passthrough", |b| {
        b.iter(|| black_box(run(&mut Passthrough::new("m-2024-01-01"), &anth)))
    });
    g.bench_function("openai_to_anthropic", |b| {
        b.iter(|| black_box(run(&mut FromOpenAi::new("m-2024-01-01"), &oai)))
    });
    g.finish();
}

fn bench_requests(c: &mut Criterion) {
    let openai = serde_json::to_vec(&json!({
        "model": "m", "max_tokens": 256, "stream": true, "temperature": 0.7,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Summarise the following text. ".repeat(40)},
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "Thanks, now in French."}
        ],
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    }))
    .unwrap();
    let anthropic = serde_json::to_vec(&json!({
        "model": "m", "max_tokens": 256, "stream": true, "temperature": 0.7,
        "system": "You are a helpful assistant.",
        "messages": [
            {"role": "user", "content": "Summarise the following text. ".repeat(40)},
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "Thanks, now in French."}
        ],
        "tools": [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}]
    }))
    .unwrap();
    let mut g = c.benchmark_group("request_translate");
    g.bench_function("openai_to_openai", |b| {
        b.iter(|| {
            let r = parse_chat_request(black_box(&openai)).unwrap();
            black_box(upstream_body(&r, "up", Some(256)))
        })
    });
    g.bench_function("openai_to_anthropic", |b| {
        b.iter(|| {
            let r = parse_chat_request(black_box(&openai)).unwrap();
            black_box(openai_to_messages(&r, "up", 256).unwrap())
        })
    });
    g.bench_function("anthropic_to_openai", |b| {
        b.iter(|| {
            let r = parse_messages_request(black_box(&anthropic)).unwrap();
            black_box(upstream_body(&r.chat().unwrap(), "up", Some(256)))
        })
    });
    g.bench_function("anthropic_to_anthropic", |b| {
        b.iter(|| {
            let r = parse_messages_request(black_box(&anthropic)).unwrap();
            black_box(r.passthrough_body("up", 256))
        })
    });
    g.finish();

    let completion = serde_json::to_vec(&json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "word ".repeat(200)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 25, "completion_tokens": 200, "total_tokens": 225}
    }))
    .unwrap();
    let message = serde_json::to_vec(&json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "word ".repeat(200)}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 25, "output_tokens": 200}
    }))
    .unwrap();
    let mut g = c.benchmark_group("reply_translate");
    g.bench_function("openai_to_openai", |b| {
        b.iter(|| {
            black_box(
                rewrite_completion(black_box(&completion), "m", |_| Usage::default()).unwrap(),
            )
        })
    });
    g.bench_function("anthropic_to_openai", |b| {
        b.iter(|| {
            black_box(message_to_completion(black_box(&message), "m", 1_700_000_000).unwrap())
        })
    });
    g.bench_function("openai_to_anthropic", |b| {
        b.iter(|| {
            black_box(
                completion_to_message(black_box(&completion), "m", |_| Usage::default()).unwrap(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench_streams, bench_requests);
criterion_main!(benches);
