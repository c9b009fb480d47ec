//! Validation of a chat-completions body (SPEC.md, Chat completion request) and its rewrite
//! for an upstream.
//!
//! The table's fields are checked strictly and named in the error; fields beyond the table
//! that real OpenAI clients send (`top_p`, `seed`, `response_format`, roles `tool` and
//! `developer`, …) pass through untouched, so new OpenAI parameters keep working.

use serde_json::{Map, Value};

use crate::GatewayError;

const ROLES: &[&str] = &[
    "system",
    "user",
    "assistant",
    "tool",
    "developer",
    "function",
];
const TOOL_CHOICES: &[&str] = &["auto", "none", "required"];
/// The longest model name accepted.
const MAX_MODEL_BYTES: usize = 256;
/// The most completions (`n`) one request may ask for.
const MAX_CHOICES: u64 = 128;

/// A validated request: the fields the pipeline needs, and the body to pass on.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    pub stream: bool,
    /// The client asked for a usage chunk (`stream_options.include_usage`).
    pub client_wants_usage: bool,
    /// `max_tokens`, or the newer `max_completion_tokens`.
    pub max_tokens: Option<u64>,
    /// `n`: completions asked for (1 when absent).
    pub n: u64,
    pub body: Map<String, Value>,
    /// Size of the body as received, to size the upstream copy in one allocation.
    pub raw_len: usize,
}

fn field_err(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// Parses and validates a request body.
pub fn parse_chat_request(raw: &[u8]) -> Result<ChatRequest, GatewayError> {
    let value: Value = serde_json::from_slice(raw)
        .map_err(|e| GatewayError::invalid(format!("body: malformed JSON ({e})")))?;
    let Value::Object(body) = value else {
        return Err(GatewayError::invalid("body: must be a JSON object"));
    };

    let model = match body.get("model") {
        None | Some(Value::Null) => return Err(field_err("model", "is required")),
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err(field_err("model", "must not be empty"))
        }
        // A model name goes into logs, metrics labels and the ledger: no novel-length ones.
        Some(Value::String(s)) if s.len() > MAX_MODEL_BYTES => {
            return Err(field_err("model", "must be at most 256 bytes"))
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(field_err("model", "must be a string")),
    };

    match body.get("messages") {
        None | Some(Value::Null) => return Err(field_err("messages", "is required")),
        Some(Value::Array(msgs)) if msgs.is_empty() => {
            return Err(field_err("messages", "must contain at least one message"))
        }
        Some(Value::Array(msgs)) => {
            for (i, m) in msgs.iter().enumerate() {
                check_message(i, m)?;
            }
        }
        Some(_) => return Err(field_err("messages", "must be an array")),
    }

    if let Some(t) = body.get("temperature") {
        match t.as_f64() {
            Some(x) if (0.0..=2.0).contains(&x) => {}
            Some(_) => return Err(field_err("temperature", "must be between 0.0 and 2.0")),
            None if t.is_null() => {}
            None => return Err(field_err("temperature", "must be a number")),
        }
    }
    if let Some(t) = body.get("top_p") {
        match t.as_f64() {
            Some(x) if (0.0..=1.0).contains(&x) => {}
            None if t.is_null() => {}
            _ => return Err(field_err("top_p", "must be a number between 0 and 1")),
        }
    }

    let mut max_tokens = None;
    for key in ["max_tokens", "max_completion_tokens"] {
        match body.get(key) {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => {
                    max_tokens = Some(max_tokens.map_or(n, |m: u64| m.min(n)));
                }
                _ => return Err(field_err(key, "must be a positive integer")),
            },
        }
    }

    let stream = match body.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(field_err("stream", "must be a boolean")),
    };

    let client_wants_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => match o.get("include_usage") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(field_err(
                    "stream_options.include_usage",
                    "must be a boolean",
                ))
            }
        },
        Some(_) => return Err(field_err("stream_options", "must be an object")),
    };

    if let Some(tools) = body.get("tools") {
        check_tools(tools)?;
    }
    if let Some(tc) = body.get("tool_choice") {
        check_tool_choice(tc)?;
    }
    let n = match body.get("n") {
        None | Some(Value::Null) => 1,
        // OpenAI's own bound; every choice is held for max_tokens.
        Some(v) => match v.as_u64() {
            Some(n @ 1..=MAX_CHOICES) => n,
            _ => return Err(field_err("n", "must be an integer from 1 to 128")),
        },
    };
    if let Some(stop) = body.get("stop") {
        let ok = match stop {
            Value::Null | Value::String(_) => true,
            Value::Array(a) => a.iter().all(Value::is_string),
            _ => false,
        };
        if !ok {
            return Err(field_err("stop", "must be a string or an array of strings"));
        }
    }

    Ok(ChatRequest {
        model,
        stream,
        client_wants_usage,
        max_tokens,
        n,
        body,
        raw_len: raw.len(),
    })
}

fn check_message(i: usize, m: &Value) -> Result<(), GatewayError> {
    let field = |f: &str| format!("messages[{i}].{f}");
    let Value::Object(o) = m else {
        return Err(field_err(&format!("messages[{i}]"), "must be an object"));
    };
    let role = match o.get("role") {
        Some(Value::String(r)) => r.as_str(),
        None => return Err(field_err(&field("role"), "is required")),
        Some(_) => return Err(field_err(&field("role"), "must be a string")),
    };
    if !ROLES.contains(&role) {
        return Err(field_err(
            &field("role"),
            "must be one of system, user, assistant, tool, developer",
        ));
    }
    let content = o.get("content");
    let content_ok = match content {
        Some(Value::String(_)) => true,
        Some(Value::Array(parts)) => parts.iter().all(|p| {
            p.as_object()
                .and_then(|p| p.get("type"))
                .is_some_and(Value::is_string)
        }),
        // An assistant turn that only calls tools carries no content.
        None | Some(Value::Null) => {
            role == "assistant" && (o.contains_key("tool_calls") || o.contains_key("function_call"))
        }
        Some(_) => false,
    };
    if !content_ok {
        return Err(match content {
            None | Some(Value::Null) => field_err(&field("content"), "is required"),
            _ => field_err(
                &field("content"),
                "must be a string or an array of content parts with a type",
            ),
        });
    }
    if let Some(calls) = o.get("tool_calls") {
        if !calls.is_array() {
            return Err(field_err(&field("tool_calls"), "must be an array"));
        }
    }
    if role == "tool" && !o.get("tool_call_id").is_some_and(Value::is_string) {
        return Err(field_err(
            &field("tool_call_id"),
            "is required for role tool",
        ));
    }
    Ok(())
}

fn check_tools(tools: &Value) -> Result<(), GatewayError> {
    let Value::Array(list) = tools else {
        if tools.is_null() {
            return Ok(());
        }
        return Err(field_err("tools", "must be an array"));
    };
    for (i, t) in list.iter().enumerate() {
        let at = |f: &str| format!("tools[{i}]{f}");
        let Value::Object(t) = t else {
            return Err(field_err(&at(""), "must be an object"));
        };
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(field_err(&at(".type"), "must be \"function\""));
        }
        let Some(Value::Object(f)) = t.get("function") else {
            return Err(field_err(&at(".function"), "must be an object"));
        };
        match f.get("name") {
            Some(Value::String(n)) if !n.is_empty() => {}
            _ => {
                return Err(field_err(
                    &at(".function.name"),
                    "must be a non-empty string",
                ))
            }
        }
        if let Some(d) = f.get("description") {
            if !d.is_string() && !d.is_null() {
                return Err(field_err(&at(".function.description"), "must be a string"));
            }
        }
        if let Some(p) = f.get("parameters") {
            let Value::Object(p) = p else {
                return Err(field_err(
                    &at(".function.parameters"),
                    "must be a JSON Schema object",
                ));
            };
            if let Some(props) = p.get("properties") {
                if !props.is_object() {
                    return Err(field_err(
                        &at(".function.parameters.properties"),
                        "must be an object",
                    ));
                }
            }
            if let Some(req) = p.get("required") {
                if !req
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string))
                {
                    return Err(field_err(
                        &at(".function.parameters.required"),
                        "must be an array of strings",
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_tool_choice(tc: &Value) -> Result<(), GatewayError> {
    match tc {
        Value::Null => Ok(()),
        Value::String(s) if TOOL_CHOICES.contains(&s.as_str()) => Ok(()),
        Value::String(_) => Err(field_err(
            "tool_choice",
            "must be \"auto\", \"none\", \"required\" or a function object",
        )),
        Value::Object(o) => {
            let named = o
                .get("function")
                .and_then(|f| f.get("name"))
                .is_some_and(Value::is_string);
            if o.get("type").and_then(Value::as_str) == Some("function") && named {
                Ok(())
            } else {
                Err(field_err(
                    "tool_choice",
                    "object must be {\"type\":\"function\",\"function\":{\"name\":…}}",
                ))
            }
        }
        _ => Err(field_err("tool_choice", "must be a string or an object")),
    }
}

/// The body sent to an OpenAI-compatible upstream for one attempt: the candidate's upstream
/// model name, `max_tokens` as the pipeline decided, and, for streams, a request for the usage
/// chunk so that metering never depends on counting.
pub fn upstream_body(req: &ChatRequest, upstream_model: &str, max_tokens: Option<u64>) -> Vec<u8> {
    // Written field by field from the parsed body rather than cloning the whole map to change
    // three fields: this runs for every request and every failover attempt.
    let body = &req.body;
    let set_completion = max_tokens.filter(|_| body.contains_key("max_completion_tokens"));
    let set_max = max_tokens
        .filter(|_| body.contains_key("max_tokens") || !body.contains_key("max_completion_tokens"));
    let stream_options = req.stream.then(|| {
        let mut o = match body.get("stream_options") {
            Some(Value::Object(o)) => o.clone(),
            _ => Map::new(),
        };
        o.insert("include_usage".into(), Value::Bool(true));
        Value::Object(o)
    });
    let mut out = Vec::with_capacity(req.raw_len + upstream_model.len() + 64);
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, k: &str, v: &dyn ErasedJson| {
        out.push(if first { b'{' } else { b',' });
        first = false;
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, k);
        out.push(b':');
        v.write(out);
    };
    for (k, v) in body {
        match k.as_str() {
            "model" => put(&mut out, k, &upstream_model),
            "max_completion_tokens" if set_completion.is_some() => {
                put(&mut out, k, &set_completion.unwrap_or_default())
            }
            "max_tokens" if set_max.is_some() => put(&mut out, k, &set_max.unwrap_or_default()),
            "stream_options" if stream_options.is_some() => {
                put(&mut out, k, stream_options.as_ref().unwrap_or(v))
            }
            _ => put(&mut out, k, v),
        }
    }
    if !body.contains_key("model") {
        put(&mut out, "model", &upstream_model);
    }
    if let Some(n) = set_max.filter(|_| !body.contains_key("max_tokens")) {
        put(&mut out, "max_tokens", &n);
    }
    if let Some(o) = stream_options
        .as_ref()
        .filter(|_| !body.contains_key("stream_options"))
    {
        put(&mut out, "stream_options", o);
    }
    if first {
        out.push(b'{');
    }
    out.push(b'}');
    out
}

/// A JSON value of one of the few types [`upstream_body`] writes.
trait ErasedJson {
    fn write(&self, out: &mut Vec<u8>);
}

impl<T: serde::Serialize> ErasedJson for T {
    fn write(&self, out: &mut Vec<u8>) {
        let _ = serde_json::to_writer(out, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ChatRequest, GatewayError> {
        parse_chat_request(&serde_json::to_vec(&v).unwrap())
    }

    fn msg() -> Value {
        json!([{"role":"user","content":"hi"}])
    }

    fn err_of(v: Value) -> String {
        parse(v).unwrap_err().message
    }

    #[test]
    fn accepts_minimal_and_openai_extras() {
        let r = parse(json!({"model":"m","messages":msg()})).unwrap();
        assert_eq!(r.model, "m");
        assert!(!r.stream);
        let r = parse(json!({
            "model":"m","stream":true,"stream_options":{"include_usage":true},
            "messages":[
                {"role":"developer","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"hi"}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"42"}
            ],
            "top_p":0.5,"seed":7,"stop":["x"],"response_format":{"type":"json_object"},
            "tool_choice":{"type":"function","function":{"name":"f"}},
            "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{},"required":[]}}}],
            "max_completion_tokens": 5
        }))
        .unwrap();
        assert!(r.stream && r.client_wants_usage);
        assert_eq!(r.max_tokens, Some(5));
    }

    #[test]
    fn each_bad_field_is_named() {
        assert!(parse_chat_request(b"{not json")
            .unwrap_err()
            .message
            .starts_with("body:"));
        assert!(parse_chat_request(b"[1]")
            .unwrap_err()
            .message
            .starts_with("body:"));
        assert!(err_of(json!({"messages":msg()})).starts_with("model:"));
        assert!(err_of(json!({"model":5,"messages":msg()})).starts_with("model:"));
        assert!(err_of(json!({"model":"m".repeat(257),"messages":msg()})).starts_with("model:"));
        assert!(parse_chat_request(
            &serde_json::to_vec(&json!({"model":"m".repeat(256),"messages":msg()})).unwrap()
        )
        .is_ok());
        assert!(err_of(json!({"model":"m"})).starts_with("messages:"));
        assert!(err_of(json!({"model":"m","messages":[]})).starts_with("messages:"));
        assert!(
            err_of(json!({"model":"m","messages":[{"role":"wizard","content":"x"}]}))
                .starts_with("messages[0].role")
        );
        assert!(err_of(json!({"model":"m","messages":[{"content":"x"}]}))
            .starts_with("messages[0].role"));
        assert!(err_of(json!({"model":"m","messages":[{"role":"user"}]}))
            .starts_with("messages[0].content"));
        assert!(
            err_of(json!({"model":"m","messages":[{"role":"user","content":3}]}))
                .starts_with("messages[0].content")
        );
        for t in [json!(-0.1), json!(2.5), json!("hot")] {
            assert!(
                err_of(json!({"model":"m","messages":msg(),"temperature":t}))
                    .starts_with("temperature")
            );
        }
        for n in [json!(0), json!(-3), json!(1.5), json!("9")] {
            assert!(err_of(json!({"model":"m","messages":msg(),"max_tokens":n}))
                .starts_with("max_tokens"));
        }
        for n in [json!(0), json!(129), json!(1.5), json!("2")] {
            assert!(err_of(json!({"model":"m","messages":msg(),"n":n})).starts_with("n:"));
        }
        let parsed = |n: serde_json::Value| {
            parse_chat_request(
                &serde_json::to_vec(&json!({"model":"m","messages":msg(),"n":n})).unwrap(),
            )
            .map(|r| r.n)
        };
        assert_eq!(parsed(json!(null)), Ok(1));
        assert_eq!(parsed(json!(128)), Ok(128));
        assert!(err_of(json!({"model":"m","messages":msg(),"stream":"yes"})).starts_with("stream"));
        assert!(err_of(json!({"model":"m","messages":msg(),"tools":{}})).starts_with("tools"));
        assert!(
            err_of(json!({"model":"m","messages":msg(),"tools":[{"type":"function"}]}))
                .starts_with("tools[0].function")
        );
        assert!(err_of(
            json!({"model":"m","messages":msg(),"tools":[{"type":"x","function":{"name":"f"}}]})
        )
        .starts_with("tools[0].type"));
        assert!(err_of(json!({"model":"m","messages":msg(),"tools":[{"type":"function","function":{"name":"f","parameters":{"required":"a"}}}]}))
            .starts_with("tools[0].function.parameters.required"));
        assert!(
            err_of(json!({"model":"m","messages":msg(),"tool_choice":"always"}))
                .starts_with("tool_choice")
        );
        assert!(
            err_of(json!({"model":"m","messages":msg(),"tool_choice":7}))
                .starts_with("tool_choice")
        );
    }

    #[test]
    fn upstream_body_sets_model_usage_and_max_tokens() {
        let r = parse(
            json!({"model":"alias","messages":msg(),"stream":true,"max_tokens":100,"seed":1}),
        )
        .unwrap();
        let out: Value = serde_json::from_slice(&upstream_body(&r, "up-1", Some(40))).unwrap();
        assert_eq!(out["model"], "up-1");
        assert_eq!(out["max_tokens"], 40);
        assert_eq!(out["stream_options"]["include_usage"], true);
        assert_eq!(out["seed"], 1);
        let r = parse(json!({"model":"alias","messages":msg()})).unwrap();
        let out: Value = serde_json::from_slice(&upstream_body(&r, "up-1", None)).unwrap();
        assert!(out.get("stream_options").is_none());
        assert!(out.get("max_tokens").is_none());
        assert_eq!(out["messages"], msg());

        // The newer field is kept and capped; no max_tokens is invented beside it. The
        // client's own stream options are kept and usage is added; odd keys survive intact.
        let r = parse(
            json!({"model":"a","messages":msg(),"stream":true,"max_completion_tokens":500,
            "stream_options":{"include_usage":false,"x":1},"we\"ird\u{e9}":[1,{"a":null}]}),
        )
        .unwrap();
        let raw = upstream_body(&r, "up-2", Some(64));
        let out: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(out["model"], "up-2");
        assert_eq!(out["max_completion_tokens"], 64);
        assert!(out.get("max_tokens").is_none());
        assert_eq!(out["stream_options"], json!({"include_usage":true,"x":1}));
        assert_eq!(out["we\"ird\u{e9}"], json!([1,{"a":null}]));
        assert_eq!(out.as_object().unwrap().len(), 6);

        // A stream_options that is not an object is replaced; max_tokens is added when absent.
        let r = parse(json!({"model":"a","messages":msg(),"stream":true,"stream_options":null}))
            .unwrap();
        let out: Value = serde_json::from_slice(&upstream_body(&r, "u", Some(7))).unwrap();
        assert_eq!(out["stream_options"], json!({"include_usage":true}));
        assert_eq!(out["max_tokens"], 7);
    }
}
