"""Drives a running Tollgate's /v1/embeddings with the official `openai` Python SDK.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT/v1 TOLLGATE_API_KEY=... python openai_embeddings.py
Models: `emb` (an embedding model), `chat` (a chat model). Prints TOTAL_TOKENS=<n>, the prompt
tokens the replies reported, for the caller to check the charge against.
"""
import math
import os

import openai

client = openai.OpenAI(
    base_url=os.environ["TOLLGATE_BASE_URL"], api_key=os.environ["TOLLGATE_API_KEY"], max_retries=0, timeout=20
)
total = 0

# The SDK's default: it asks for base64 and decodes the vectors itself.
r = client.embeddings.create(model="emb", input="hello from the official SDK")
assert r.object == "list", r
assert r.model == "emb", r.model
assert len(r.data) == 1 and r.data[0].index == 0, r.data
decoded = list(r.data[0].embedding)
assert len(decoded) == 8 and all(isinstance(x, float) for x in decoded), decoded
assert r.usage.prompt_tokens == r.usage.total_tokens > 0, r.usage
total += r.usage.prompt_tokens
print("ok default (base64 decoded)")

# Floats asked for: the same vector as the decoded base64 one.
r = client.embeddings.create(model="emb", input="hello from the official SDK", encoding_format="float")
assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(r.data[0].embedding, decoded)), (r.data[0].embedding, decoded)
total += r.usage.prompt_tokens
print("ok float")

# A batch with fewer dimensions.
r = client.embeddings.create(model="emb", input=["one", "two two", "three three three"], dimensions=4, encoding_format="float")
assert [d.index for d in r.data] == [0, 1, 2], r.data
assert all(len(d.embedding) == 4 for d in r.data), r.data
total += r.usage.prompt_tokens
print("ok batch")

# Token arrays.
r = client.embeddings.create(model="emb", input=[[1, 2, 3], [4, 5]], encoding_format="float")
assert len(r.data) == 2 and r.usage.prompt_tokens == 5, r
total += r.usage.prompt_tokens
print("ok token arrays")

# A chat model is refused as the SDK's BadRequestError, naming the field.
try:
    client.embeddings.create(model="chat", input="x")
    raise AssertionError("a chat model answered embeddings")
except openai.BadRequestError as e:
    assert e.status_code == 400, e
    assert "chat model" in str(e), e
print("ok refused")

print("TOTAL_TOKENS=%d" % total)
print("sdk: all passed")
