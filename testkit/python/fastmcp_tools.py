"""A tool server built with the official `mcp` Python SDK's FastMCP, for the tests.

Usage: python fastmcp_tools.py PORT stateful|stateless
stateful:  sessions (Mcp-Session-Id), replies as SSE streams.
stateless: no sessions, plain JSON replies.
Tools: add(a, b) and echo(text).
"""
import sys

from mcp.server.fastmcp import FastMCP

port = int(sys.argv[1])
stateless = sys.argv[2] == "stateless"
server = FastMCP(
    "fake-tools",
    host="127.0.0.1",
    port=port,
    stateless_http=stateless,
    json_response=stateless,
    log_level="WARNING",
)


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echoes its text."""
    return text


server.run(transport="streamable-http")
