//! The `tools` and `tool_choice` members of a chat request, checked in place (SPEC.md, Chat
//! completion request): each wrong part is named, as for the rest of the request.

use serde_json::value::RawValue;

use crate::json::raw::{self, Kind};
use crate::GatewayError;

const TOOL_CHOICES: &[&str] = &["auto", "none", "required"];

/// An invalid-request error naming the field, as every check of the request words it.
pub(super) fn field_err(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

pub(super) fn check_tools(tools: &RawValue) -> Result<(), GatewayError> {
    let Some(list) = raw::array(tools) else {
        if raw::is_null(tools) {
            return Ok(());
        }
        return Err(field_err("tools", "must be an array"));
    };
    for (i, t) in list.iter().enumerate() {
        let at = |f: &str| format!("tools[{i}]{f}");
        let Some(t) = raw::object(t) else {
            return Err(field_err(&at(""), "must be an object"));
        };
        if raw::get(&t, "type").and_then(raw::as_str).as_deref() != Some("function") {
            return Err(field_err(&at(".type"), "must be \"function\""));
        }
        let Some(f) = raw::get(&t, "function").and_then(raw::object) else {
            return Err(field_err(&at(".function"), "must be an object"));
        };
        if raw::get(&f, "name")
            .and_then(raw::as_str)
            .is_none_or(|n| n.is_empty())
        {
            return Err(field_err(
                &at(".function.name"),
                "must be a non-empty string",
            ));
        }
        if let Some(d) = raw::get(&f, "description") {
            if !raw::is_string(d) && !raw::is_null(d) {
                return Err(field_err(&at(".function.description"), "must be a string"));
            }
        }
        if let Some(p) = raw::get(&f, "parameters") {
            let Some(p) = raw::object(p) else {
                return Err(field_err(
                    &at(".function.parameters"),
                    "must be a JSON Schema object",
                ));
            };
            if let Some(props) = raw::get(&p, "properties") {
                if raw::kind(props) != Kind::Object {
                    return Err(field_err(
                        &at(".function.parameters.properties"),
                        "must be an object",
                    ));
                }
            }
            if let Some(req) = raw::get(&p, "required") {
                if !raw::array(req).is_some_and(|a| a.iter().all(|s| raw::is_string(s))) {
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

pub(super) fn check_tool_choice(tc: &RawValue) -> Result<(), GatewayError> {
    match raw::kind(tc) {
        Kind::Null => Ok(()),
        Kind::String => match raw::as_str(tc) {
            Some(s) if TOOL_CHOICES.contains(&&*s) => Ok(()),
            _ => Err(field_err(
                "tool_choice",
                "must be \"auto\", \"none\", \"required\" or a function object",
            )),
        },
        Kind::Object => {
            let o = raw::object(tc).unwrap_or_default();
            let named = raw::get(&o, "function")
                .and_then(raw::object)
                .and_then(|f| raw::get(&f, "name"))
                .is_some_and(raw::is_string);
            if raw::get(&o, "type").and_then(raw::as_str).as_deref() == Some("function") && named {
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
