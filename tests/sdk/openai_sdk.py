"""Drives a running Tollgate with the official `openai` Python SDK.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT/v1 python openai_sdk.py
Models: `good` answers, `broken` has no working upstream (502).
"""
import os
import sys

import openai

base = os.environ["TOLLGATE_BASE_URL"]
client = openai.OpenAI(base_url=base, api_key=os.environ["TOLLGATE_API_KEY"], max_retries=0, timeout=20)
msgs = [{"role": "user", "content": "Say hello"}]

# Non-streaming.
r = client.chat.completions.create(model="good", messages=msgs, temperature=0.2)
assert r.object == "chat.completion", r
assert r.model == "good-2024-01-01", r.model
assert r.choices[0].message.role == "assistant"
assert r.choices[0].message.content.startswith("Hello from"), r.choices[0].message.content
assert r.choices[0].finish_reason == "stop"
assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens > 0
raw = client.chat.completions.with_raw_response.create(model="good", messages=msgs)
assert float(raw.headers["x-credits-remaining"]) > 0, raw.headers
print("ok non-streaming")

# Streaming, with the usage chunk asked for.
text, finish, usage, models = "", None, None, set()
stream = client.chat.completions.create(
    model="good", messages=msgs, stream=True, stream_options={"include_usage": True}
)
for chunk in stream:
    assert chunk.object == "chat.completion.chunk"
    models.add(chunk.model)
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        if c.delta.content:
            text += c.delta.content
        if c.finish_reason:
            finish = c.finish_reason
assert text.startswith("Hello from"), text
assert finish == "stop", finish
assert usage is not None and usage.completion_tokens > 0, usage
assert models == {"good-2024-01-01"}, models
print("ok streaming")

# A tool call.
tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
r = client.chat.completions.create(model="good", messages=msgs, tools=tools, tool_choice="auto")
call = r.choices[0].message.tool_calls[0]
assert call.function.name == "get_weather", call
assert '"Paris"' in call.function.arguments
assert r.choices[0].finish_reason == "tool_calls"
print("ok tool call")

# The SDK's exception classes for the gateway's errors.
def expect(exc, status, **kw):
    try:
        client.chat.completions.create(**kw)
    except exc as e:
        assert e.status_code == status, (e.status_code, status)
        body = e.body if isinstance(e.body, dict) else {}
        err = body.get("error", body)
        assert err.get("code") == status, e.body
        return
    raise AssertionError(f"expected {exc.__name__}")

expect(openai.BadRequestError, 400, model="good", messages=[])
expect(openai.BadRequestError, 400, model="good", messages=msgs, temperature=3)
expect(openai.NotFoundError, 404, model="no-such-model", messages=msgs)
expect(openai.InternalServerError, 502, model="broken", messages=msgs)
bad = openai.OpenAI(base_url=base, api_key="tg_" + "x" * 40, max_retries=0, timeout=20)
try:
    bad.chat.completions.create(model="good", messages=msgs)
    raise AssertionError("expected AuthenticationError")
except openai.AuthenticationError as e:
    assert e.status_code == 401
print("ok errors")
print("sdk: all passed")
sys.exit(0)
