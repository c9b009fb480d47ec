//! The provider seam: what each provider kind means on the wire. The forwarding loop and the
//! health check ask here for the path, the headers and the body format.

use tollgate_filters::anthropic::request::{
    check_translatable, openai_to_messages, MessagesRequest,
};
use tollgate_filters::openai::request::{upstream_body, ChatRequest};
use tollgate_filters::GatewayError;

use crate::config::{EndpointUrl, Provider, ProviderKind};

/// The Messages API version the translation is written against.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The path of a chat request on this endpoint.
pub fn chat_path(p: &Provider, endpoint: &EndpointUrl) -> String {
    match p.kind.wire() {
        ProviderKind::OpenAi | ProviderKind::Demo => {
            format!("{}/v1/chat/completions", endpoint.base_path)
        }
        ProviderKind::Anthropic => format!("{}/v1/messages", endpoint.base_path),
    }
}

/// The path of a legacy completion on an OpenAI-compatible endpoint (the only kind whose
/// models may serve them: the config refuses `completions` on another kind).
pub fn completions_path(endpoint: &EndpointUrl) -> String {
    format!("{}/v1/completions", endpoint.base_path)
}

/// The path of a Responses API request on a provider that serves it (`responses_api`).
pub fn responses_path(endpoint: &EndpointUrl) -> String {
    format!("{}/v1/responses", endpoint.base_path)
}

/// The path of an embeddings request on an OpenAI-compatible endpoint (the only kind that
/// serves them: the config refuses an embedding model of another kind).
pub fn embeddings_path(endpoint: &EndpointUrl) -> String {
    format!("{}/v1/embeddings", endpoint.base_path)
}

/// The header that carries the provider's key, when it has one.
pub fn auth_header(p: &Provider) -> Option<(&'static str, String)> {
    let key = p.api_key.as_ref()?;
    match p.kind {
        ProviderKind::OpenAi => Some(("Authorization", format!("Bearer {key}"))),
        ProviderKind::Anthropic => Some(("x-api-key", key.clone())),
        ProviderKind::Demo => None,
    }
}

/// Headers every request of this kind carries besides the key (health checks too).
pub fn fixed_headers(p: &Provider) -> &'static [(&'static str, &'static str)] {
    match p.kind {
        ProviderKind::OpenAi | ProviderKind::Demo => &[],
        ProviderKind::Anthropic => &[("anthropic-version", ANTHROPIC_VERSION)],
    }
}

/// The request body for this provider: the client's request with the candidate's upstream
/// model name and the `max_tokens` the hold allows. `anthropic`: the body as an Anthropic
/// client sent it (`/v1/messages`), passed to an Anthropic provider nearly as is, blocks the
/// gateway does not interpret (`cache_control`, `thinking`) included; an OpenAI provider gets
/// its OpenAI translation in `req`. `Err`: the request has no faithful translation for this
/// kind (the forwarding loop skips the candidate).
pub fn chat_body(
    p: &Provider,
    req: &ChatRequest,
    anthropic: Option<&MessagesRequest<'_>>,
    upstream_model: &str,
    max_tokens: u64,
) -> Result<Vec<u8>, GatewayError> {
    match (p.kind.wire(), anthropic) {
        (ProviderKind::OpenAi | ProviderKind::Demo, Some(original)) => {
            original.check_openai_translatable()?;
            Ok(upstream_body(req, upstream_model, Some(max_tokens)))
        }
        (ProviderKind::OpenAi | ProviderKind::Demo, None) => {
            Ok(upstream_body(req, upstream_model, Some(max_tokens)))
        }
        (ProviderKind::Anthropic, Some(original)) => {
            // Extended thinking needs max_tokens above its budget; a hold that lowered it
            // that far cannot buy this request from this model.
            if original.thinking_budget().is_some_and(|b| b >= max_tokens) {
                return Err(GatewayError::invalid(
                    "max_tokens: the credit hold cannot pay for the thinking budget",
                ));
            }
            Ok(original.passthrough_body(upstream_model, max_tokens))
        }
        (ProviderKind::Anthropic, None) => {
            // The first candidate was checked before the hold; a later one is checked here.
            check_translatable(req)?;
            openai_to_messages(req, upstream_model, max_tokens)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn provider(key: Option<&str>) -> Provider {
        Provider {
            responses_api: false,
            continuation: tollgate_filters::resume::request::Continuation::Prompt,
            name: "p".into(),
            kind: ProviderKind::OpenAi,
            endpoints: vec![],
            api_key: key.map(str::to_owned),
            health_check: None,
            self_hosted: false,
            eject_after_failures: 3,
            eject_for: Duration::from_secs(1),
            tls: Default::default(),
            cache_ttl: Duration::from_secs(600),
        }
    }

    #[test]
    fn anthropic_kind_paths_and_headers() {
        let e = EndpointUrl::parse("https://api.anthropic.com").unwrap();
        let mut p = provider(Some("sk-ant"));
        p.kind = ProviderKind::Anthropic;
        assert_eq!(chat_path(&p, &e), "/v1/messages");
        assert_eq!(auth_header(&p), Some(("x-api-key", "sk-ant".to_string())));
        assert_eq!(fixed_headers(&p), &[("anthropic-version", "2023-06-01")]);
    }

    #[test]
    fn openai_kind_paths_and_auth() {
        let e = EndpointUrl::parse("http://127.0.0.1:9000/openai/").unwrap();
        assert_eq!(
            chat_path(&provider(None), &e),
            "/openai/v1/chat/completions"
        );
        assert_eq!(auth_header(&provider(None)), None);
        assert_eq!(
            auth_header(&provider(Some("sk-1"))),
            Some(("Authorization", "Bearer sk-1".to_string()))
        );
    }
}
