"""A client of the official `anthropic` Python SDK that never marks a prompt for caching: two
turns of one conversation (a long system prompt, tools), the second streamed, on a model whose
cache breakpoints are on. The gateway's marks make the first turn write the prompt cache and the
second read it; the SDK reads the counts and the cost. Prints `COST=<credits>` per turn and
`READ=<tokens>` / `WRITE=<tokens>` for the test.

Usage: TOLLGATE_URL=http://127.0.0.1:PORT TOLLGATE_API_KEY=... python anthropic_cache.py
Model: `marked` (Anthropic provider, cache breakpoints on).
"""
import os

import anthropic

base = os.environ["TOLLGATE_URL"]
key = os.environ["TOLLGATE_API_KEY"]
client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=20)
system = "You answer questions about the attached handbook. " * 120
tools = [
    {"name": "lookup", "description": "Find a page", "input_schema": {"type": "object"}},
    {"name": "quote", "description": "Quote a page", "input_schema": {"type": "object"}},
]
messages = [{"role": "user", "content": "What does chapter 2 say?"}]


def report(usage, cost, turn):
    print(f"COST={cost}")
    print(f"READ={usage.cache_read_input_tokens}")
    print(f"WRITE={usage.cache_creation_input_tokens}")
    print(f"ok turn {turn}: {usage}")


first = client.messages.create(
    model="marked", max_tokens=100, system=system, tools=tools, messages=messages
)
assert first.usage.cache_creation_input_tokens > 0, first.usage
assert first.usage.cache_read_input_tokens == 0, first.usage
report(first.usage, first.usage.model_extra["cost"], 1)

messages += [
    {"role": "assistant", "content": [b.model_dump() for b in first.content]},
    {"role": "user", "content": "And chapter 3?"},
]
with client.messages.stream(
    model="marked", max_tokens=100, system=system, tools=tools, messages=messages
) as stream:
    # The cost comes in the closing `message_delta`; the cache counts in `message_start`,
    # which the SDK's final message keeps.
    delta = None
    for event in stream:
        if event.type == "message_delta":
            delta = event
    second = stream.get_final_message()
assert second.usage.cache_read_input_tokens > 0, second.usage
report(second.usage, delta.usage.model_extra["cost"], 2)
print("sdk: all passed")
