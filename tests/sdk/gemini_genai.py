"""Drives a running Tollgate's Gemini API with Google's `google-genai` Python SDK.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT TOLLGATE_API_KEY=... python gemini_genai.py
Model: `gpt-x` (an OpenAI-compatible chat model whose fake calls the first tool offered until it
sees the tool's output). Prints TOKENS=<prompt> <output>, for the caller to check the charge.
"""
import os

from google import genai
from google.genai import errors, types

client = genai.Client(api_key=os.environ["TOLLGATE_API_KEY"],
                      http_options=types.HttpOptions(base_url=os.environ["TOLLGATE_BASE_URL"]))
tokens = [0, 0]


def count(usage):
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count, usage
    tokens[0] += usage.prompt_token_count
    tokens[1] += usage.candidates_token_count


r = client.models.generate_content(
    model="gpt-x", contents="Say hello",
    config=types.GenerateContentConfig(system_instruction="Be brief.", temperature=0.2, max_output_tokens=100))
assert r.text.startswith("Hello"), r.text
assert r.candidates[0].finish_reason == types.FinishReason.STOP, r.candidates
count(r.usage_metadata)
print("ok generate")

text, last = "", None
for chunk in client.models.generate_content_stream(model="gpt-x", contents="Stream a greeting"):
    text += chunk.text or ""
    last = chunk
assert text.startswith("Hello"), text
count(last.usage_metadata)
print("ok stream")

n = client.models.count_tokens(model="gpt-x", contents="How many tokens is this?")
assert n.total_tokens > 0, n
print("ok count tokens")

weather = types.FunctionDeclaration(
    name="get_weather", description="The weather in a city",
    parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}))
config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[weather])],
                                     automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
ask = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
r = client.models.generate_content(model="gpt-x", contents=[ask], config=config)
call = r.function_calls[0]
assert call.name == "get_weather" and call.args == {"city": "Paris"}, r.function_calls
count(r.usage_metadata)
answer = types.Part.from_function_response(name="get_weather", response={"sky": "sun"})
r = client.models.generate_content(
    model="gpt-x", config=config,
    contents=[ask, r.candidates[0].content, types.Content(role="user", parts=[answer])])
assert r.text.startswith("Hello"), r.text
count(r.usage_metadata)
print("ok function call round trip")

try:
    client.models.generate_content(model="no-such-model", contents="x")
    raise AssertionError("an unknown model was served")
except errors.ClientError as e:
    assert e.code == 404, e
print("ok errors")

# The cost: the SDK passes over usageMetadata's cost members (its typed model drops them) and
# keeps the header; the raw reply has them. Each equals what the balance fell by.
import json
from decimal import Decimal

import httpx

base = os.environ["TOLLGATE_BASE_URL"]
key = os.environ["TOLLGATE_API_KEY"]


def balance():
    r = httpx.get(base + "/api/v1/auth/me", headers={"Authorization": "Bearer " + key})
    return Decimal(str(r.json()["credits"]))


before = balance()
r = client.models.generate_content(model="gpt-x", contents="What did that cost?")
assert r.text.startswith("Hello"), r.text
charged = Decimal(r.sdk_http_response.headers["x-credits-charged"])
count(r.usage_metadata)
assert charged > 0 and before - balance() == charged, (before, charged)
before = balance()
raw = client.models.generate_content(
    model="gpt-x", contents="What did that cost?",
    config=types.GenerateContentConfig(should_return_http_response=True))
usage = json.loads(raw.sdk_http_response.body)["usageMetadata"]
cost = Decimal(str(usage["cost"]))
assert cost == Decimal(str(usage["costDetails"]["input"])) + Decimal(str(usage["costDetails"]["output"])), usage
assert before - balance() == cost, (before, cost, usage)
tokens[0] += usage["promptTokenCount"]
tokens[1] += usage["candidatesTokenCount"]
print("ok cost (JSON)")

# A stream: the SDK reads it whole; its last chunk as sent carries the cost.
before = balance()
text = "".join(c.text or "" for c in client.models.generate_content_stream(model="gpt-x", contents="Stream the cost"))
assert text.startswith("Hello"), text
fell = before - balance()
with httpx.stream("POST", base + "/v1beta/models/gpt-x:streamGenerateContent?alt=sse",
                  headers={"x-goog-api-key": key},
                  json={"contents": [{"role": "user", "parts": [{"text": "Stream the cost"}]}]}) as resp:
    chunks = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: ")]
usage = chunks[-1]["usageMetadata"]
assert Decimal(str(usage["cost"])) == fell, (usage, fell)
tokens[0] += 2 * usage["promptTokenCount"]
tokens[1] += 2 * usage["candidatesTokenCount"]
print("ok cost (stream)")

print(f"TOKENS={tokens[0]} {tokens[1]}")
print("sdk: all passed")
