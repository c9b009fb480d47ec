//! Anthropic's Messages API (https://docs.anthropic.com/en/api/messages) both ways: as a
//! provider behind the OpenAI chat API, and as an API in front. Pure functions; the service
//! does the I/O.
