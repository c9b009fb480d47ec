//! The credit arithmetic: costs, cache parts, holds, the credits' text and the prompt estimate.

use super::*;

#[test]
fn cost_is_exact_then_rounded_up_once() {
    // 1 credit / 1K in, 2 credits / 1K out: 1000 µcr and 2000 µcr per token.
    let u = Usage {
        prompt_tokens: 11,
        completion_tokens: 7,
        ..Usage::default()
    };
    assert_eq!(cost(u, 1_000_000, 2_000_000), 11_000 + 14_000);
    // 0.15 credits / 1K = 150 µcr per token... per 1K: 150_000 µcr/1K = 150 µcr/token.
    assert_eq!(
        cost(
            Usage {
                prompt_tokens: 3,
                completion_tokens: 0,
                ..Usage::default()
            },
            150_000,
            0
        ),
        450
    );
    // Fractional: 1 µcr per 1K tokens, 1 token = 0.001 µcr, rounded up to 1.
    assert_eq!(
        cost(
            Usage {
                prompt_tokens: 1,
                completion_tokens: 0,
                ..Usage::default()
            },
            1,
            0
        ),
        1
    );
    assert_eq!(cost(Usage::default(), 5, 5), 0);
}

#[test]
fn cache_parts_are_priced_at_their_rates_and_rounded_once() {
    // Anthropic's prices per 1K: input 3, output 15, read 0.3, 5-minute write 3.75,
    // one-hour write 6.
    let rates = Rates {
        input: 3_000_000,
        output: 15_000_000,
        cache_read: Some(300_000),
        cache_write: Some(3_750_000),
        cache_write_1h: Some(6_000_000),
    };
    let u = Usage {
        prompt_tokens: 1_000 + 200 + 100 + 50,
        completion_tokens: 7,
        cache_read_tokens: 200,
        cache_write_tokens: 150,
        cache_write_1h_tokens: 50,
        reasoning_tokens: 3,
    };
    let p = parts_at(u, &rates);
    assert_eq!(p.input, 1_000 * 3_000_000);
    assert_eq!(p.output, 7 * 15_000_000);
    assert_eq!(p.cache_read, 200 * 300_000);
    assert_eq!(p.cache_write, 100 * 3_750_000 + 50 * 6_000_000);
    assert_eq!(
        cost_at(u, &rates),
        3_000_000 + 105_000 + 60_000 + 375_000 + 300_000
    );
    // Reasoning is part of the output: it adds nothing of its own.
    assert_eq!(
        cost_at(
            Usage {
                reasoning_tokens: 0,
                ..u
            },
            &rates
        ),
        cost_at(u, &rates)
    );
    // One-hour writes without a rate of their own cost the five-minute write rate; cache
    // counts without rates cost the input rate.
    let no_1h = Rates {
        cache_write_1h: None,
        ..rates
    };
    assert_eq!(parts_at(u, &no_1h).cache_write, 150 * 3_750_000);
    let plain = Rates {
        input: 3_000_000,
        output: 15_000_000,
        ..Rates::default()
    };
    assert_eq!(cost_at(u, &plain), cost(u, 3_000_000, 15_000_000));
    // Fractions of a µcr are summed first: three tokens at 1 µcr per 1K each part is one
    // µcr, not three.
    let tiny = Rates {
        input: 1,
        output: 1,
        cache_read: Some(1),
        cache_write: Some(1),
        cache_write_1h: Some(1),
    };
    let u = Usage {
        prompt_tokens: 2,
        completion_tokens: 1,
        cache_read_tokens: 1,
        ..Usage::default()
    };
    assert_eq!(cost_at(u, &tiny), 1);
}

#[test]
fn cache_counts_above_the_prompt_are_capped() {
    let rates = Rates {
        input: 1_000,
        output: 0,
        cache_read: Some(100),
        cache_write: Some(2_000),
        cache_write_1h: Some(3_000),
    };
    // An upstream's counts that add up to more than the prompt: reads first, then writes,
    // one-hour writes never more than the writes.
    let u = Usage {
        prompt_tokens: 10,
        cache_read_tokens: 8,
        cache_write_tokens: 5,
        cache_write_1h_tokens: 9,
        ..Usage::default()
    };
    let p = parts_at(u, &rates);
    assert_eq!((p.input, p.cache_read, p.cache_write), (0, 800, 6_000));
    // OpenAI's cached tokens alone: the rest of the prompt at the input rate.
    let u = Usage {
        prompt_tokens: 2_000,
        cache_read_tokens: 1_024,
        ..Usage::default()
    };
    assert_eq!(
        cost_at(u, &rates),
        (976 * 1_000 + 1_024 * 100_u64).div_ceil(1000) as i64
    );
}

#[test]
fn hold_size_and_affordable_tokens() {
    let h = size_hold(10, 100, 1, 1_000_000, 2_000_000);
    assert_eq!(h.prompt_cost, 10_000);
    assert_eq!(h.wanted, 10_000 + 200_000);
    assert_eq!(h.minimum, 12_000);
    assert_eq!(h.affordable_tokens(h.wanted, 100), 100);
    assert_eq!(h.affordable_tokens(50_000, 100), 20);
    assert_eq!(h.affordable_tokens(12_000, 100), 1);
    assert_eq!(h.affordable_tokens(11_999, 100), 0);
    let free = size_hold(10, 100, 1, 0, 0);
    assert_eq!((free.wanted, free.minimum), (0, 0));
    assert_eq!(free.affordable_tokens(0, 100), 100);
}

#[test]
fn every_choice_of_n_is_held_for_max_tokens() {
    let h = size_hold(10, 100, 4, 1_000_000, 2_000_000);
    assert_eq!(h.wanted, 10_000 + 4 * 200_000);
    assert_eq!(h.minimum, 10_000 + 4 * 2_000, "one token for each choice");
    assert_eq!(h.affordable_tokens(h.wanted, 100), 100);
    // Half the output paid for: each of the 4 choices gets half its tokens.
    assert_eq!(h.affordable_tokens(10_000 + 400_000, 100), 50);
    assert_eq!(h.affordable_tokens(h.minimum, 100), 1);
    assert_eq!(h.affordable_tokens(h.minimum - 1, 100), 0);
}

#[test]
fn credits_edges() {
    assert_eq!(from_credits(100.0), Some(100_000_000));
    assert_eq!(from_credits(0.000001), Some(1));
    assert_eq!(from_credits(f64::NAN), None);
    assert_eq!(to_credits(1_500_000), 1.5);
    assert_eq!(format_credits(99_987_500), "99.9875");
    assert_eq!(format_credits(100_000_000), "100");
    assert_eq!(format_credits(1), "0.000001");
    assert_eq!(format_credits(-1_500_000), "-1.5");
    assert_eq!(format_credits(2_100_001), "2.100001");
    assert_eq!(format_credits(0), "0");
    assert_eq!(format_credits(-30), "-0.00003");
}

fn estimate(body: serde_json::Value) -> u64 {
    let bytes = serde_json::to_vec(&body).unwrap();
    let req = crate::openai::request::parse_chat_request(&bytes).unwrap();
    estimate_prompt_tokens(&req, bytes.len())
}

#[test]
fn prompt_estimate_leans_high() {
    let m = serde_json::json!([{"role":"user","content":"hello world, how are you today?"}]);
    let est = estimate(serde_json::json!({"model":"m","messages":m}));
    assert!(est >= crate::tokens::count_prompt(&m), "{est}");
}

#[test]
fn tools_and_response_format_count_toward_the_estimate() {
    let m = serde_json::json!([{"role":"user","content":"hi"}]);
    let plain = estimate(serde_json::json!({"model":"m","messages":m}));
    let schema = serde_json::json!({"type":"object","properties":{"city":{"type":"string","description":"x".repeat(3000)}}});
    let tools = estimate(serde_json::json!({"model":"m","messages":m,
        "tools":[{"type":"function","function":{"name":"weather","parameters":schema}}]}));
    assert!(tools >= plain + 1000, "{plain} -> {tools}");
    let format = estimate(serde_json::json!({"model":"m","messages":m,
        "response_format":{"type":"json_schema","json_schema":{"name":"s","schema":schema}}}));
    assert!(format >= plain + 1000, "{plain} -> {format}");
}

#[test]
fn an_image_part_counts_its_allowance_not_its_data_url() {
    let image = |url: &str| {
        serde_json::json!({"model":"m","messages":[{"role":"user","content":[
            {"type":"text","text":"what is this?"},
            {"type":"image_url","image_url":{"url":url}}]}]})
    };
    let small = estimate(image("https://example.com/a.png"));
    let data = format!("data:image/png;base64,{}", "A".repeat(1_000_000));
    let big = estimate(image(&data));
    assert!(
        (IMAGE_PART_TOKENS..IMAGE_PART_TOKENS + 100).contains(&small),
        "{small}"
    );
    assert!(big.abs_diff(small) < 20, "{small} vs {big}");
}
