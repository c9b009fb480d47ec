"""The official `mcp` 1.x Python SDK client against the gateway (tests/sdk_mcp2_instances.rs).

Usage: mcp1_calls.py URL KEY TOOL CALLS: initialises, lists the tools and calls TOOL with
{"text": "hi"} CALLS times, every request on a new connection (so that a round-robin front
sends them to instances in turn); prints "sdk1: N calls" at the end.
"""
import asyncio
import sys

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def fresh_connections(headers=None, timeout=None, auth=None):
    return httpx.AsyncClient(
        headers=headers,
        timeout=timeout,
        auth=auth,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


async def main(url, key, tool, calls):
    headers = {"Authorization": f"Bearer {key}"}
    async with streamablehttp_client(
        url, headers=headers, httpx_client_factory=fresh_connections
    ) as (read, write, _):
        async with ClientSession(read, write) as s:
            await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            assert tool in names, names
            for _ in range(int(calls)):
                r = await s.call_tool(tool, {"text": "hi"})
                assert not r.isError and r.content[0].text == "hi", r
    print(f"sdk1: {calls} calls")


asyncio.run(main(*sys.argv[1:5]))
