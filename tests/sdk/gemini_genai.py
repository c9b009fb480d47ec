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

print(f"TOKENS={tokens[0]} {tokens[1]}")
print("sdk: all passed")
