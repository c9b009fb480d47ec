"""A tool server made with the official `mcp` 2.x Python SDK (MCPServer, stateless, JSON
replies): tool `echo`. It answers both protocol eras (2026-07-28 and the initialize handshake),
as the SDK does. Usage: mcp2_tools.py PORT
"""

import asyncio
import sys

from mcp.server import MCPServer

mcp = MCPServer("sdk2-tools")


@mcp.tool()
def echo(text: str) -> str:
    """Echoes its text."""
    return text


if __name__ == "__main__":
    port = int(sys.argv[1])
    asyncio.run(mcp.run_streamable_http_async(host="127.0.0.1", port=port, stateless_http=True, json_response=True))
