//! The Messages body written from a typed OpenAI request: the output types, borrowing texts
//! and schemas from the client's body (nothing is decoded that is only passed on), and the
//! content blocks of each OpenAI message.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::json::raw;
use crate::openai::request::Message;
use crate::GatewayError;

/// A Messages API body; members left out when the OpenAI request had nothing for them.
#[derive(Serialize)]
pub(super) struct Body<'a> {
    pub model: &'a str,
    pub max_tokens: u64,
    pub messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<System<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata<'a>>,
}

#[derive(Serialize)]
pub(super) struct Turn<'a> {
    pub role: &'static str,
    pub content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum System<'a> {
    Text(String),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
pub(super) struct Metadata<'a> {
    pub user_id: &'a RawValue,
}

#[derive(Serialize)]
pub(super) struct Tool<'a> {
    pub name: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a RawValue>,
    pub input_schema: Schema<'a>,
}

/// A tool's parameters, or the empty object schema Anthropic requires when it has none.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Schema<'a> {
    Given(&'a RawValue),
    Empty {
        r#type: &'static str,
        properties: Empty,
    },
}

#[derive(Serialize)]
pub(super) struct Empty {}

#[derive(Serialize)]
pub(super) struct Choice<'a> {
    pub r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disable_parallel_tool_use: bool,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Block<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a RawValue>,
    },
    Image {
        source: Source<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a RawValue>,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: Cow<'a, str>,
        input: Box<RawValue>,
    },
    ToolResult {
        tool_use_id: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<ToolContent<'a>>,
    },
}

impl Block<'_> {
    pub fn text(&self) -> Option<&str> {
        match self {
            Block::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum ToolContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Source<'a> {
    Base64 {
        media_type: Cow<'a, str>,
        data: Cow<'a, str>,
    },
    Url {
        url: Cow<'a, str>,
    },
}

pub(super) fn no_equivalent(field: &str) -> GatewayError {
    GatewayError::invalid(format!(
        "{field}: not supported for this model: its provider (Anthropic Messages API) has no \
         equivalent"
    ))
}

/// Text blocks of a string or an array of parts whose types are in `allowed` (`refusal`
/// parts of an assistant turn are its text); empty texts dropped, `cache_control` kept.
pub(super) fn text_blocks<'a>(
    i: usize,
    content: Option<&'a RawValue>,
    allowed: &[&str],
) -> Result<Vec<Block<'a>>, GatewayError> {
    let mut out = Vec::new();
    let Some(content) = content else {
        return Ok(out);
    };
    match raw::kind(content) {
        raw::Kind::String => push_text(&mut out, raw::as_str(content), None),
        raw::Kind::Array => {
            for (j, p) in raw::array(content)
                .unwrap_or_default()
                .into_iter()
                .enumerate()
            {
                let p = raw::object(p).unwrap_or_default();
                let ty = raw::get(&p, "type").and_then(raw::as_str);
                let ty = ty.as_deref().unwrap_or_default();
                if !allowed.contains(&ty) {
                    return Err(unsupported_part(i, j, ty));
                }
                let text = raw::get(&p, ty).and_then(raw::as_str);
                push_text(&mut out, text, raw::get(&p, "cache_control"));
            }
        }
        _ => {}
    }
    Ok(out)
}

fn push_text<'a>(
    out: &mut Vec<Block<'a>>,
    text: Option<Cow<'a, str>>,
    cache_control: Option<&'a RawValue>,
) {
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        out.push(Block::Text {
            text,
            cache_control,
        });
    }
}

fn unsupported_part(i: usize, j: usize, ty: &str) -> GatewayError {
    GatewayError::invalid(format!(
        "messages[{i}].content[{j}].type: \"{ty}\" is not supported for this model: its \
         provider (Anthropic Messages API) has no equivalent"
    ))
}

pub(super) fn user_blocks<'a>(
    i: usize,
    content: Option<&'a RawValue>,
) -> Result<Vec<Block<'a>>, GatewayError> {
    let Some(parts) = content.and_then(raw::array) else {
        return text_blocks(i, content, &["text"]);
    };
    let mut out = Vec::new();
    for (j, p) in parts.into_iter().enumerate() {
        let p = raw::object(p).unwrap_or_default();
        let cache_control = raw::get(&p, "cache_control");
        match raw::get(&p, "type").and_then(raw::as_str).as_deref() {
            Some("text") => {
                let text = raw::get(&p, "text").and_then(raw::as_str);
                push_text(&mut out, text, cache_control);
            }
            Some("image_url") => out.push(Block::Image {
                source: image_source(i, j, &p)?,
                cache_control,
            }),
            other => return Err(unsupported_part(i, j, other.unwrap_or_default())),
        }
    }
    Ok(out)
}

fn image_source<'a>(
    i: usize,
    j: usize,
    part: &raw::MemberList<'a>,
) -> Result<Source<'a>, GatewayError> {
    let field = format!("messages[{i}].content[{j}].image_url.url");
    let url = raw::get(part, "image_url").and_then(|v| match raw::kind(v) {
        raw::Kind::String => raw::as_str(v),
        _ => raw::object(v).and_then(|o| raw::get(&o, "url").and_then(raw::as_str)),
    });
    let url = url.ok_or_else(|| GatewayError::invalid(format!("{field}: is required")))?;
    if url.starts_with("data:") {
        let bad = || {
            GatewayError::invalid(format!(
                "{field}: a data URL must be of the form data:<media type>;base64,<data>"
            ))
        };
        // Borrowed from the body unless the URL had escapes to undo.
        let (media_type, data) = match url {
            Cow::Borrowed(u) => {
                let (m, d) = u["data:".len()..].split_once(";base64,").ok_or_else(bad)?;
                (Cow::Borrowed(m), Cow::Borrowed(d))
            }
            Cow::Owned(u) => {
                let (m, d) = u["data:".len()..].split_once(";base64,").ok_or_else(bad)?;
                (Cow::Owned(m.to_owned()), Cow::Owned(d.to_owned()))
            }
        };
        return Ok(Source::Base64 { media_type, data });
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(Source::Url { url });
    }
    Err(GatewayError::invalid(format!(
        "{field}: must be an http(s) URL or a base64 data URL"
    )))
}

pub(super) fn assistant_blocks<'a>(
    i: usize,
    m: &Message<'a>,
) -> Result<Vec<Block<'a>>, GatewayError> {
    if m.function_call.is_some_and(|f| !raw::is_null(f)) {
        return Err(no_equivalent(&format!("messages[{i}].function_call")));
    }
    let mut out = text_blocks(i, m.content, &["text", "refusal"])?;
    let calls = m.tool_calls.and_then(raw::array).unwrap_or_default();
    for (k, call) in calls.into_iter().enumerate() {
        let at = |f: &str| format!("messages[{i}].tool_calls[{k}].{f}");
        let call = raw::object(call).unwrap_or_default();
        let id = raw::get(&call, "id").and_then(raw::as_str);
        let id = id.ok_or_else(|| GatewayError::invalid(format!("{}: is required", at("id"))))?;
        let f = raw::get(&call, "function")
            .and_then(raw::object)
            .unwrap_or_default();
        let name = raw::get(&f, "name").and_then(raw::as_str).ok_or_else(|| {
            GatewayError::invalid(format!("{}: is required", at("function.name")))
        })?;
        let args = raw::get(&f, "arguments").and_then(raw::as_str);
        let args = args.as_deref().unwrap_or_default();
        let input = if args.trim().is_empty() {
            RawValue::from_string("{}".to_owned())
        } else {
            // The arguments are JSON text inside a string: passed on as that text once checked.
            serde_json::from_str::<Box<RawValue>>(args)
        };
        let input = match input {
            Ok(v) if raw::kind(&v) == raw::Kind::Object => v,
            _ => {
                return Err(GatewayError::invalid(format!(
                    "{}: must be the JSON text of an object",
                    at("function.arguments")
                )))
            }
        };
        out.push(Block::ToolUse { id, name, input });
    }
    Ok(out)
}
