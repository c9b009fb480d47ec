"""Reads streams that were cut and resumed on another provider with the official `openai` and
`anthropic` Python SDKs: no exception, one answer (docs/api.md, "Streams that survive a cut").

Usage: TOLLGATE_BASE=http://127.0.0.1:PORT TOLLGATE_API_KEY=... EXPECT_CHAT=... EXPECT_MESSAGES=...
python resume_sdk.py. Model `m1` is cut after three words and continued on `m2`; `claude-1`
likewise on `claude-2`.
"""
import os

import anthropic
import openai

base, key = os.environ["TOLLGATE_BASE"], os.environ["TOLLGATE_API_KEY"]
msgs = [{"role": "user", "content": "Say hello"}]

# OpenAI: the opt-in as an `extra_body` extension.
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=20)
text, ids, models, usage = "", set(), [], None
stream = client.chat.completions.create(
    model="m1",
    messages=msgs,
    stream=True,
    stream_options={"include_usage": True},
    extra_body={"tollgate": {"resume": True}},
)
for chunk in stream:
    ids.add(chunk.id)
    models.append(chunk.model)
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
    if chunk.usage:
        usage = chunk.usage
assert text == os.environ["EXPECT_CHAT"], repr(text)
assert len(ids) == 1, ids
assert models[0] == "m1" and models[-1] == "m2", models
assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
print("ok openai chat stream")

# The same through the Responses API.
events = list(
    client.responses.create(
        model="m1", input="Say hello", stream=True, extra_body={"tollgate": {"resume": True}}
    )
)
done = [e for e in events if e.type == "response.completed"]
assert len(done) == 1, [e.type for e in events]
assert done[0].response.output_text == os.environ["EXPECT_CHAT"], done[0].response.output_text
print("ok openai responses stream")

# Anthropic: the opt-in as a header; the SDK's stream helper accumulates the message.
claude = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=20)
with claude.messages.stream(
    model="claude-1",
    max_tokens=100,
    messages=msgs,
    extra_headers={"X-Tollgate-Resume": "on"},
) as s:
    streamed = "".join(s.text_stream)
    final = s.get_final_message()
assert streamed == os.environ["EXPECT_MESSAGES"], repr(streamed)
assert final.content[0].text == streamed, final
assert final.stop_reason == "end_turn", final.stop_reason
print("ok anthropic messages stream")

print("sdk: all passed")
