//! The provider seam: what each provider kind means on the wire. The forwarding loop and the
//! health check ask here for the path, the auth header and the body format, so that a second
//! kind (Anthropic's Messages API) is one more arm in each function.

use tollgate_filters::openai::request::{upstream_body, ChatRequest};

use crate::config::{EndpointUrl, Provider, ProviderKind};

/// The path of a chat request on this endpoint.
pub fn chat_path(p: &Provider, endpoint: &EndpointUrl) -> String {
    match p.kind {
        ProviderKind::OpenAi => format!("{}/v1/chat/completions", endpoint.base_path),
    }
}

/// The header that carries the provider's key, when it has one.
pub fn auth_header(p: &Provider) -> Option<(&'static str, String)> {
    let key = p.api_key.as_ref()?;
    match p.kind {
        ProviderKind::OpenAi => Some(("Authorization", format!("Bearer {key}"))),
    }
}

/// The request body for this provider: the client's request with the candidate's upstream
/// model name and the `max_tokens` the hold allows.
pub fn chat_body(
    p: &Provider,
    req: &ChatRequest,
    upstream_model: &str,
    max_tokens: Option<u64>,
) -> Vec<u8> {
    match p.kind {
        ProviderKind::OpenAi => upstream_body(req, upstream_model, max_tokens),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn provider(key: Option<&str>) -> Provider {
        Provider {
            name: "p".into(),
            kind: ProviderKind::OpenAi,
            endpoints: vec![],
            api_key: key.map(str::to_owned),
            health_check: None,
            self_hosted: false,
            eject_after_failures: 3,
            eject_for: Duration::from_secs(1),
        }
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
