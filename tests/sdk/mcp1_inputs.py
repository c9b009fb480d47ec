"""The official `mcp` 1.x Python SDK client (2025 era) with a sampling and an elicitation
callback calls a 2026-07-28 tool server's tool that asks for input first (`greet`, an
input-required result) through the gateway, which puts the inputs to it as requests
(tests/sdk_mcp2_instances.rs).

Usage: mcp1_inputs.py URL KEY TOOL: calls TOOL twice; prints "sdk1 inputs: ok".
"""
import asyncio
import sys

from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

asked = []


async def sampling(context, params: types.CreateMessageRequestParams):
    asked.append("sampling")
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled<{params.messages[0].content.text}>"),
        model="agent-model",
    )


async def elicitation(context, params: types.ElicitRequestParams):
    asked.append("elicitation")
    assert params.message == "Your name?", params
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def main(url, key, tool):
    headers = {"Authorization": f"Bearer {key}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(
            read, write, sampling_callback=sampling, elicitation_callback=elicitation
        ) as s:
            await s.initialize()
            for _ in range(2):
                r = await asyncio.wait_for(s.call_tool(tool, {}), 30)
                assert not r.isError, r
                assert r.content[0].text == "Hello, Ada! sampled<Say hi>", r
    assert sorted(asked) == ["elicitation"] * 2 + ["sampling"] * 2, asked
    print("sdk1 inputs: ok")


asyncio.run(main(*sys.argv[1:4]))
