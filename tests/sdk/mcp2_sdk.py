"""The official `mcp` 2.x Python SDK against the gateway (tests/sdk_mcp2.rs).

Usage: mcp2_sdk.py URL KEY TOOL MODE:: the SDK's Client in MODE (`2026-07-28`: stateless only, no
handshake; `auto`: discover, else initialize; `legacy`: initialize) lists the tools and calls
TOOL with {"text": "hi"}; prints {"tools": [...], "text": ..., "price": ...} as JSON.
"""

import asyncio
import json
import sys


async def client(url: str, key: str, tool: str, mode: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
            listed = await c.list_tools()
            result = await c.call_tool(tool, {"text": "hi"})
            text = result.content[0].text if result.content else None
            price = None
            for t in listed.tools:
                if t.name == tool and t.meta:
                    price = t.meta.get("tollgate/price_credits")
            print(json.dumps({"tools": [t.name for t in listed.tools], "text": text, "error": result.is_error, "price": price}))


if __name__ == "__main__":
    asyncio.run(client(*sys.argv[1:5]))
