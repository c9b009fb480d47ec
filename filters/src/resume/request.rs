//! The request side of a resumed stream: the opt-in a client sends (the `X-Tollgate-Resume`
//! header, the body's `tollgate` extension, which never reaches a provider) and the body that
//! asks the next provider to continue the partial answer.

use memchr::memmem;
use serde_json::{json, Value};

use crate::json::splice::Members;
use crate::GatewayError;

/// The user turn that asks a provider without a continuation mode to go on (README, "Streams
/// that survive a cut").
pub const CONTINUE_PROMPT: &str = "Your previous answer was cut off. Continue it exactly where it stopped: write only the text that comes next, without repeating anything, without any preamble.";

/// How a provider is asked to continue a partial answer (`continuation` of a provider).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// The partial answer as the final assistant turn, which the model continues (Anthropic's
    /// prefill; always the case for an Anthropic provider).
    Prefill,
    /// vLLM (and SGLang): the final assistant turn with `continue_final_message: true` and
    /// `add_generation_prompt: false`.
    ContinueFinalMessage,
    /// DeepSeek's prefix completion: the final assistant turn with `prefix: true`.
    Prefix,
    /// No continuation mode: the partial answer as an assistant turn, then [`CONTINUE_PROMPT`].
    Prompt,
}

impl Continuation {
    pub const NAMES: [&'static str; 3] = ["continue_final_message", "prefix", "prompt"];

    /// The config name of an OpenAI-compatible provider's mode.
    pub fn parse(s: &str) -> Option<Continuation> {
        match s {
            "continue_final_message" => Some(Continuation::ContinueFinalMessage),
            "prefix" => Some(Continuation::Prefix),
            "prompt" => Some(Continuation::Prompt),
            _ => None,
        }
    }
}

/// The `X-Tollgate-Resume` header's value.
pub fn header_value(v: &str) -> Result<bool, GatewayError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(GatewayError::invalid(
            "X-Tollgate-Resume: must be on or off",
        )),
    }
}

/// What a body's `tollgate` extension asked.
#[derive(Debug, PartialEq)]
pub struct Extension {
    /// `tollgate.resume`, when set.
    pub resume: Option<bool>,
    /// `tollgate.cache` (the exact response cache), when set.
    pub cache: Option<bool>,
    /// The body without the extension, as it goes on.
    pub body: Vec<u8>,
}

/// The body's `tollgate` member (`{"tollgate": {"resume": true}}`, what the SDKs send from
/// `extra_body`), checked and taken out; `None` when the body has none (found without
/// parsing). A body that is not a JSON object is left to its front door's own checks.
pub fn take_extension(raw: &[u8]) -> Result<Option<Extension>, GatewayError> {
    if memmem::find(raw, b"\"tollgate\"").is_none() {
        return Ok(None);
    }
    let Ok(Members(members)) = serde_json::from_slice::<Members<'_>>(raw) else {
        return Ok(None);
    };
    let Some((_, ext)) = members.iter().find(|(k, _)| k == "tollgate") else {
        return Ok(None);
    };
    let ext: Value = serde_json::from_str(ext.get()).unwrap_or(Value::Null);
    let Some(options) = ext.as_object() else {
        return Err(GatewayError::invalid(
            "tollgate: must be an object, e.g. {\"resume\": true}",
        ));
    };
    let (mut resume, mut cache) = (None, None);
    for (k, v) in options {
        let slot = match k.as_str() {
            "resume" => &mut resume,
            "cache" => &mut cache,
            _ => {
                return Err(GatewayError::invalid(format!(
                    "tollgate.{k}: unknown option; the options are: resume, cache"
                )))
            }
        };
        match v {
            Value::Bool(b) => *slot = Some(*b),
            Value::Null => {}
            _ => {
                return Err(GatewayError::invalid(format!(
                    "tollgate.{k}: must be a boolean"
                )))
            }
        }
    }
    let mut body = Vec::with_capacity(raw.len());
    body.push(b'{');
    for (k, v) in members.iter().filter(|(k, _)| k != "tollgate") {
        if body.len() > 1 {
            body.push(b',');
        }
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut body, k.as_ref());
        body.push(b':');
        body.extend_from_slice(v.get().as_bytes());
    }
    body.push(b'}');
    Ok(Some(Extension {
        resume,
        cache,
        body,
    }))
}

fn messages(body: &mut Value) -> Result<&mut Vec<Value>, String> {
    body.get_mut("messages")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| "the body has no messages".to_owned())
}

/// An OpenAI-compatible leg's body (as the attempt would send it) turned into the request to
/// continue `partial`.
pub fn openai_continuation(
    body: &[u8],
    partial: &str,
    how: Continuation,
) -> Result<Vec<u8>, String> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let turns = messages(&mut v)?;
    match how {
        Continuation::Prefill | Continuation::ContinueFinalMessage => {
            turns.push(json!({"role": "assistant", "content": partial}));
        }
        Continuation::Prefix => {
            turns.push(json!({"role": "assistant", "content": partial, "prefix": true}));
        }
        Continuation::Prompt => {
            turns.push(json!({"role": "assistant", "content": partial}));
            turns.push(json!({"role": "user", "content": CONTINUE_PROMPT}));
        }
    }
    if how == Continuation::ContinueFinalMessage {
        v["continue_final_message"] = json!(true);
        v["add_generation_prompt"] = json!(false);
    }
    serde_json::to_vec(&v).map_err(|e| e.to_string())
}

/// An Anthropic leg's body turned into the request to continue `partial`: the partial answer
/// as the assistant's prefill (which may not end in white space, so it is trimmed; the
/// continuation writes it again only if the model does), without extended thinking (which a
/// prefill cannot carry).
pub fn anthropic_continuation(body: &[u8], partial: &str) -> Result<Vec<u8>, String> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if let Some(o) = v.as_object_mut() {
        o.remove("thinking");
    }
    let prefill = partial.trim_end();
    if prefill.is_empty() {
        return Err("nothing to continue".into());
    }
    let turns = messages(&mut v)?;
    // A client's own prefill is the start of the answer: the partial answer follows it.
    match turns.last_mut() {
        Some(last) if last["role"] == "assistant" && last["content"].is_string() => {
            let before = last["content"].as_str().unwrap_or_default().to_owned();
            last["content"] = json!(format!("{before}{prefill}"));
        }
        _ => turns.push(json!({"role": "assistant", "content": prefill})),
    }
    serde_json::to_vec(&v).map_err(|e| e.to_string())
}
