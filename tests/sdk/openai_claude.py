"""Drives a running Tollgate with the official `openai` Python SDK against Claude models
(provider kind `anthropic`): text, a stream, and a tool-call round trip.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT/v1 TOLLGATE_API_KEY=... python openai_claude.py
Models: `claude-cache` (reports prompt-cache tokens), `claude-tools` (answers with two
parallel tool calls until it gets their results).
"""
import json
import os

import openai

client = openai.OpenAI(base_url=os.environ["TOLLGATE_BASE_URL"], api_key=os.environ["TOLLGATE_API_KEY"], max_retries=0, timeout=20)

r = client.chat.completions.create(
    model="claude-cache",
    messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}],
)
assert r.object == "chat.completion", r
assert r.model == "claude-cache-2025-01-01", r.model
assert r.choices[0].message.content.startswith("Claude cache says hello"), r.choices[0].message.content
assert r.choices[0].finish_reason == "stop"
assert r.usage.prompt_tokens == 13 + 100 + 1000, r.usage
print("ok text")

text, finish, usage = "", None, None
for chunk in client.chat.completions.create(
    model="claude-cache", messages=[{"role": "user", "content": "Say hello"}], stream=True,
    stream_options={"include_usage": True},
):
    assert chunk.model == "claude-cache-2025-01-01", chunk.model
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        if c.delta.content:
            text += c.delta.content
        if c.finish_reason:
            finish = c.finish_reason
assert text.startswith("Claude cache says hello"), text
assert finish == "stop", finish
assert usage is not None and usage.prompt_tokens == 1113, usage
print("ok stream")

tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
msgs = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]
r = client.chat.completions.create(model="claude-tools", messages=msgs, tools=tools)
assert r.choices[0].finish_reason == "tool_calls", r
calls = r.choices[0].message.tool_calls
assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Paris", "Tokyo"], calls
msgs.append(r.choices[0].message.model_dump(exclude_none=True))
for c, temp in zip(calls, ["18C", "22C"]):
    msgs.append({"role": "tool", "tool_call_id": c.id, "content": temp})
r = client.chat.completions.create(model="claude-tools", messages=msgs, tools=tools)
assert r.choices[0].finish_reason == "stop", r
assert r.choices[0].message.content.startswith("Claude tools says hello"), r
print("ok tools")
print("sdk: all passed")
