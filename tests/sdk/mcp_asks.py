"""Drives a running Tollgate with the official `mcp` Python SDK client (1.x, Streamable HTTP)
given a sampling callback and an elicitation callback: calls a FastMCP tool that asks the
client for both during the call (`ask`), through /mcp/{slug} and through /mcp, twice each.
The SDK posts its answers to the endpoint it called; in the test a round-robin front sends
them to either of two gateway instances.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT TOLLGATE_API_KEY=... TOLLGATE_SLUG=slug
"""
import asyncio
import os

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

base = os.environ["TOLLGATE_BASE_URL"]
headers = {"Authorization": f"Bearer {os.environ['TOLLGATE_API_KEY']}"}
slug = os.environ["TOLLGATE_SLUG"]
asked = []


async def sampling(context, params: types.CreateMessageRequestParams):
    asked.append("sampling")
    text = params.messages[0].content.text
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled<{text}>"),
        model="agent-model",
        stopReason="endTurn",
    )


async def elicitation(context, params: types.ElicitRequestParams):
    asked.append("elicitation")
    assert params.message == "Your name?", params
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def call(url, tool):
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(
            read, write, sampling_callback=sampling, elicitation_callback=elicitation
        ) as s:
            await s.initialize()
            for topic in ["tea", "rain"]:
                r = await asyncio.wait_for(s.call_tool(tool, {"topic": topic}), 30)
                assert not r.isError, r
                assert r.content[0].text == f"sampled<A line about {topic}> / Ada", r


async def main():
    await call(f"{base}/mcp/{slug}", "ask")
    print("ok /mcp/{slug}")
    await call(f"{base}/mcp", f"{slug}__ask")
    print("ok /mcp")
    assert asked == ["sampling", "elicitation"] * 4, asked
    print("sdk: all passed")


asyncio.run(main())
