"""The official `mcp` 2.x Python SDK against the gateway (tests/sdk_mcp2.rs).

Usage: mcp2_sdk.py URL KEY TOOL MODE [CALLS]: the SDK's Client in MODE (`2026-07-28`: stateless
only, no handshake; `auto`: discover, else initialize; `legacy`: initialize) lists the tools and
calls TOOL with {"text": "hi"} CALLS times (1 unless given; with more, every request on a new
connection, so that a round-robin front sends them to instances in turn); prints {"tools":
[...], "text": ..., "price": ..., "calls": N} as JSON, `text` the last call's.
"""

import asyncio
import json
import sys


async def client(url: str, key: str, tool: str, mode: str, calls: str = "1") -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    n = int(calls)
    limits = httpx2.Limits(max_keepalive_connections=0) if n > 1 else httpx2.Limits()
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30, limits=limits) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            listed = await c.list_tools()
            for _ in range(n):
                result = await c.call_tool(tool, {"text": "hi"})
                text = result.content[0].text if result.content else None
                assert text == "hi" and not result.is_error, result
            price = None
            for t in listed.tools:
                if t.name == tool and t.meta:
                    price = t.meta.get("tollgate/price_credits")
            print(json.dumps({"tools": [t.name for t in listed.tools], "text": text, "error": result.is_error, "price": price, "calls": n}))


if __name__ == "__main__":
    asyncio.run(client(*sys.argv[1:6]))
