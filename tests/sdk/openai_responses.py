"""Drives a running Tollgate's /v1/responses (and the legacy /v1/completions) with the official
`openai` Python SDK.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT/v1 TOLLGATE_BASE_URL_2=<another instance>
TOLLGATE_API_KEY=... python openai_responses.py
Model: `m` (an OpenAI-compatible chat model whose fake calls the first tool offered until it
sees the tool's output, and answers structured output with {"city":"Paris"}); `instruct`, a
model that serves legacy completions, at the same rates. Prints
TOKENS=<input> <output>, the usage the replies reported, for the caller to check the charge.
"""
import json
import os

import openai
import pydantic

key = os.environ["TOLLGATE_API_KEY"]
client = openai.OpenAI(base_url=os.environ["TOLLGATE_BASE_URL"], api_key=key, max_retries=0, timeout=20)
other = openai.OpenAI(base_url=os.environ["TOLLGATE_BASE_URL_2"], api_key=key, max_retries=0, timeout=20)
tokens = [0, 0]


def count(r):
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens, r.usage
    tokens[0] += r.usage.input_tokens
    tokens[1] += r.usage.output_tokens


# Text.
r = client.responses.create(model="m", input="Say hello", instructions="Be brief.", max_output_tokens=200)
assert r.object == "response" and r.status == "completed", r
assert r.id.startswith("resp_"), r.id
assert r.model == "m", r.model
assert r.output_text.startswith("Hello"), r.output_text
count(r)
print("ok text")

# A function tool round trip: the call, then its output with the call item sent back.
tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"], "additionalProperties": False}, "strict": True}]
r = client.responses.create(model="m", input="Weather in Paris?", tools=tools)
call = r.output[0]
assert call.type == "function_call" and call.name == "get_weather", r.output
assert json.loads(call.arguments) == {"city": "Paris"}, call.arguments
count(r)
conversation = [{"role": "user", "content": "Weather in Paris?"}] + r.output + [
    {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}]
r = client.responses.create(model="m", input=conversation, tools=tools)
assert r.output[0].type == "message" and r.output_text, r.output
count(r)
print("ok function tool round trip")


# Structured output: text.format json_schema, parsed by the SDK.
class Place(pydantic.BaseModel):
    city: str


r = client.responses.parse(model="m", input="Where is the Louvre?", text_format=Place)
assert r.output_parsed == Place(city="Paris"), r.output_text
count(r)
print("ok json_schema")

# previous_response_id: the chain is kept in the shared ledger, continued on another instance.
first = client.responses.create(model="m", input="My name is Ada.")
count(first)
second = other.responses.create(model="m", input="What is my name?", previous_response_id=first.id)
assert second.previous_response_id == first.id, second
count(second)
got = other.responses.retrieve(first.id)
assert got.id == first.id and got.output_text == first.output_text, got
items = client.responses.input_items.list(second.id)
assert [i.type for i in items.data] == ["message"], items
assert items.data[0].content[0].text == "What is my name?", items.data
print("ok previous_response_id across instances")

# store: false keeps nothing.
r = client.responses.create(model="m", input="forget me", store=False)
count(r)
try:
    client.responses.retrieve(r.id)
    raise AssertionError("a store: false response was kept")
except openai.NotFoundError:
    pass
client.responses.delete(first.id)
try:
    other.responses.retrieve(first.id)
    raise AssertionError("a deleted response is still there")
except openai.NotFoundError:
    pass
print("ok store false, delete")

# A stream: the typed events, and the final response with its usage.
seen = []
with client.responses.stream(model="m", input="Stream a greeting") as stream:
    for event in stream:
        seen.append(event.type)
    final = stream.get_final_response()
assert seen[0] == "response.created" and seen[-1] == "response.completed", seen
assert "response.output_text.delta" in seen, seen
assert final.output_text.startswith("Hello"), final.output_text
count(final)
print("ok stream")

# Errors map to the SDK's exception classes.
try:
    client.responses.create(model="no-such-model", input="x")
    raise AssertionError("an unknown model was served")
except openai.NotFoundError as e:
    assert e.status_code == 404
# A hosted tool offered to a chat-served model is left out, and the reply says so; forced, it
# is refused, naming tool_choice.
raw = client.responses.with_raw_response.create(model="m", input="x", tools=[{"type": "web_search"}])
assert "web_search" in raw.headers["x-tollgate-warning"], raw.headers
count(raw.parse())
try:
    client.responses.create(model="m", input="x", tools=[{"type": "web_search"}], tool_choice={"type": "web_search"})
    raise AssertionError("a forced hosted tool was accepted")
except openai.BadRequestError as e:
    assert e.body["param"] == "tool_choice", e.body
try:
    client.responses.create(model="m", input="x", tools=[{"type": "local_shell"}])
    raise AssertionError("a client-run tool other than a function was accepted")
except openai.BadRequestError as e:
    assert e.body["param"] == "tools[0].type", e.body
print("ok errors")

# Legacy completions, whole and streamed.
c = client.completions.create(model="instruct", prompt="Once upon a time", max_tokens=5)
assert c.object == "text_completion" and c.model == "instruct", c
assert c.choices[0].text and c.choices[0].finish_reason in ("stop", "length"), c.choices
assert c.usage.completion_tokens <= 5, c.usage
tokens[0] += c.usage.prompt_tokens
tokens[1] += c.usage.completion_tokens
text, usage = "", None
for chunk in client.completions.create(model="instruct", prompt=["a", "b"], stream=True, stream_options={"include_usage": True}):
    if chunk.choices:
        text += chunk.choices[0].text
    if chunk.usage:
        usage = chunk.usage
assert text and usage is not None, (text, usage)
tokens[0] += usage.prompt_tokens
tokens[1] += usage.completion_tokens
print("ok legacy completions")

print(f"TOKENS={tokens[0]} {tokens[1]}")
print("sdk: all passed")
