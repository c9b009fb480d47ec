"""The official `openai` SDK's embeddings.create on inputs that count above one token per 3
bytes (CJK, digits, base64-like), the provider reporting REPORTED prompt tokens for each: the SDK
sees usage.cost (credits) = usage.cost_details.input = the X-Credits-Charged header = the
reported tokens at RATE credits per 1K, and the balance (auth/me) falls by exactly that.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT/v1 TOLLGATE_API_KEY=... REPORTED=n RATE=r python openai_embeddings_cost.py
"""
import os
from decimal import Decimal

import httpx
import openai

base = os.environ["TOLLGATE_BASE_URL"]
key = os.environ["TOLLGATE_API_KEY"]
reported = int(os.environ["REPORTED"])
rate = Decimal(os.environ["RATE"])
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=20)


def balance():
    r = httpx.get(base.replace("/v1", "/api/v1/auth/me"), headers={"Authorization": "Bearer " + key})
    return Decimal(str(r.json()["credits"]))


want = Decimal(reported) * rate / 1000
for text in ["日本語のテキストは一バイトあたりのトークンが多い", "314159265358979323846264338",
             "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVowMTIzNDU2Nzg5"]:
    assert reported * 3 > len(text.encode()), "the estimate would have covered it"
    before = balance()
    raw = client.embeddings.with_raw_response.create(model="emb", input=text)
    r = raw.parse()
    assert r.usage.prompt_tokens == reported, r.usage
    cost = Decimal(str(r.usage.model_extra["cost"]))
    details = r.usage.model_extra["cost_details"]
    assert cost == want, (text, cost, want)
    assert Decimal(str(details["input"])) == want, (text, details)
    assert Decimal(raw.headers["x-credits-charged"]) == want, raw.headers
    assert before - balance() == want, (text, before, want)
    print("ok", text)

print("sdk: all passed")
