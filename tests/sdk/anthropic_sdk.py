"""Drives a running Tollgate's `/v1/messages` with the official `anthropic` Python SDK: to an
Anthropic provider (`claude`) and to an OpenAI-compatible one (`gpt`); text, stream, tool use;
and the SDK's exception classes for 400, 401, 404, 429 and 529.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT TOLLGATE_API_KEY=... TOLLGATE_LIMITED_KEY=...
Models: `claude`, `gpt`, `claude-overloaded` (every upstream overloaded).
"""
import os

import anthropic

base = os.environ["TOLLGATE_BASE_URL"]
key = os.environ["TOLLGATE_API_KEY"]
client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=20)
hello = [{"role": "user", "content": "Say hello"}]

for model, starts in [("claude", "Claude c says hello"), ("gpt", "Hello from g")]:
    m = client.messages.create(model=model, max_tokens=200, system="Be brief.", messages=hello)
    assert m.type == "message" and m.role == "assistant", m
    assert m.content[0].type == "text" and m.content[0].text.startswith(starts), m
    assert m.stop_reason == "end_turn", m
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0, m.usage

    with client.messages.stream(model=model, max_tokens=200, messages=hello) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text.startswith(starts), text
    assert final.stop_reason == "end_turn", final
    assert final.usage.output_tokens > 0, final.usage
    print(f"ok text and stream via {model}")

tools = [{"name": "get_weather", "description": "Weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
for model in ["claude-tools", "gpt"]:
    m = client.messages.create(model=model, max_tokens=200, tools=tools, tool_choice={"type": "any"},
                               messages=[{"role": "user", "content": "Weather in Paris?"}])
    assert m.stop_reason == "tool_use", m
    uses = [b for b in m.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather" and uses[0].input["city"] == "Paris", m
    follow = [{"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "18C"} for u in uses]}]
    m = client.messages.create(model=model, max_tokens=200, tools=tools, messages=follow)
    assert m.stop_reason == "end_turn", m
    print(f"ok tools via {model}")


# Today's Messages API: a system turn inside messages, thinking, a beta header. Claude's thinking
# block and its signature come back as sent; toward an OpenAI-compatible model thinking is left
# out (its models reason, or not, on their own) and the system turn stays where it stands.
today = [{"role": "user", "content": "hi"}, {"role": "system", "content": "Be brief."},
         {"role": "user", "content": "again"}]
m = client.messages.create(model="claude", max_tokens=2000, messages=today,
                           thinking={"type": "enabled", "budget_tokens": 1024},
                           extra_headers={"anthropic-beta": "mid-conversation-system-2026-04-07"})
assert m.content[0].type == "thinking" and m.content[0].signature, m.content
assert m.content[1].type == "text", m.content
m = client.messages.create(model="gpt", max_tokens=200, messages=today,
                           thinking={"type": "enabled", "budget_tokens": 100},
                           extra_headers={"anthropic-beta": "mid-conversation-system-2026-04-07"})
assert m.content[0].type == "text", m.content
print("ok system turn, thinking, beta header")


def expect(exc, call):
    try:
        call()
    except exc as e:
        assert isinstance(e, anthropic.APIStatusError)
        return e
    raise AssertionError(f"expected {exc.__name__}")


expect(anthropic.BadRequestError, lambda: client.messages.create(
    model="claude", max_tokens=10, messages=[{"role": "robot", "content": "hi"}]))
expect(anthropic.AuthenticationError, lambda: anthropic.Anthropic(
    base_url=base, api_key="tg_not_a_key", max_retries=0).messages.create(model="claude", max_tokens=10, messages=hello))
expect(anthropic.NotFoundError, lambda: client.messages.create(model="no-such-model", max_tokens=10, messages=hello))
limited = anthropic.Anthropic(base_url=base, api_key=os.environ["TOLLGATE_LIMITED_KEY"], max_retries=0)
limited.messages.create(model="gpt", max_tokens=10, messages=hello)
e = expect(anthropic.RateLimitError, lambda: limited.messages.create(model="gpt", max_tokens=10, messages=hello))
assert int(e.response.headers["retry-after"]) >= 1, e.response.headers
expect(anthropic.OverloadedError, lambda: client.messages.create(model="claude-overloaded", max_tokens=10, messages=hello))
print("ok errors")
print("sdk: all passed")
