"""Reads the gateway's cost fields through the official `openai` and `anthropic` Python SDKs,
which keep unknown members as pydantic extras: chat completions (JSON and the stream's usage
chunk), the Responses API (JSON and `response.completed`), and the Messages API (JSON and the
stream's `message_delta`). Prints each cost as `COST=<credits>` for the test to sum.

Usage: TOLLGATE_URL=http://127.0.0.1:PORT TOLLGATE_API_KEY=... python cost_fields.py
Models: `gpt` (OpenAI-compatible provider), `claude` (Anthropic provider).
"""
import os

import anthropic
import openai

base = os.environ["TOLLGATE_URL"]
key = os.environ["TOLLGATE_API_KEY"]
oai = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=20)
claude = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=20)
hello = [{"role": "user", "content": "Say hello"}]
PARTS = ("input", "output", "cache_read", "cache_write")


def extra(usage, name):
    """A member the SDK's model does not declare, as pydantic keeps it."""
    return (usage.model_extra or {})[name]


def check(usage, what):
    cost = extra(usage, "cost")
    details = extra(usage, "cost_details")
    assert isinstance(cost, (int, float)) and cost > 0, (what, usage)
    assert getattr(usage, "cost") == cost, (what, usage)
    assert set(details) == set(PARTS), (what, details)
    total = sum(details[p] for p in PARTS)
    # The parts are exact; the cost is their sum rounded up to the micro-credit.
    assert 0 <= cost - total < 0.000001 + 1e-12, (what, cost, details)
    # The SDK writes the extras back out as it read them.
    assert usage.model_dump()["cost"] == cost, (what, usage.model_dump())
    print(f"COST={cost}")
    print(f"ok {what}: {cost} credits")


for model in ["gpt", "claude"]:
    raw = oai.chat.completions.with_raw_response.create(model=model, messages=hello)
    r = raw.parse()
    check(r.usage, f"chat JSON via {model}")
    assert float(raw.headers["x-credits-charged"]) == extra(r.usage, "cost"), raw.headers

    usage = None
    stream = oai.chat.completions.create(
        model=model, messages=hello, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
    check(usage, f"chat stream via {model}")

    r = oai.responses.create(model=model, input="Say hello")
    check(r.usage, f"responses JSON via {model}")
    done = None
    for event in oai.responses.create(model=model, input="Say hello", stream=True):
        if event.type == "response.completed":
            done = event.response
    check(done.usage, f"responses stream via {model}")

    m = claude.messages.create(model=model, max_tokens=200, messages=hello)
    check(m.usage, f"messages JSON via {model}")
    with claude.messages.stream(model=model, max_tokens=200, messages=hello) as s:
        delta = None
        for event in s:
            if event.type == "message_delta":
                delta = event
    check(delta.usage, f"messages stream via {model}")

print("sdk: all passed")
