"""Drives a running Tollgate's /mcp with the official `mcp` Python SDK client (Streamable HTTP):
lists the tools of every live service, calls one tool of each, then connects to one service's
own endpoint /mcp/{slug} and calls its tool under its own name.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT TOLLGATE_API_KEY=... TOLLGATE_SLUGS=a,b,c
"""
import asyncio
import os

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

base = os.environ["TOLLGATE_BASE_URL"]
headers = {"Authorization": f"Bearer {os.environ['TOLLGATE_API_KEY']}"}
slugs = os.environ["TOLLGATE_SLUGS"].split(",")


async def main():
    async with streamablehttp_client(f"{base}/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.serverInfo.name == "tollgate", init
            names = {t.name for t in (await s.list_tools()).tools}
            for slug in slugs:
                assert f"{slug}__add" in names and f"{slug}__echo" in names, names
            for slug in slugs:
                r = await s.call_tool(f"{slug}__add", {"a": 2, "b": 3})
                assert not r.isError, r
                assert r.content[0].text == "5", r
            print("ok /mcp")
    async with streamablehttp_client(f"{base}/mcp/{slugs[0]}", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as s:
            await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            assert names == {"add", "echo", "ask"}, names
            r = await s.call_tool("echo", {"text": "hi there"})
            assert r.content[0].text == "hi there", r
            print("ok /mcp/{slug}")
    print("sdk: all passed")


asyncio.run(main())
