"""A tool server built with the official `mcp` Python SDK's FastMCP, for the tests.

Usage: python fastmcp_tools.py PORT stateful|stateless
stateful:  sessions (Mcp-Session-Id), replies as SSE streams.
stateless: no sessions, plain JSON replies.
Tools: add(a, b), echo(text), and ask(topic), which asks the client during the call: a
sampling request (ctx.session.create_message), then an elicitation (ctx.elicit) for a name.
"""
import sys

from pydantic import BaseModel

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import SamplingMessage, TextContent

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


class Name(BaseModel):
    name: str


@server.tool()
async def ask(topic: str, ctx: Context) -> str:
    """Asks the client for a line about the topic, then for a name."""
    line = f"A line about {topic}"
    sampled = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=line))],
        max_tokens=20,
        # On the call's own stream (else the SDK sends it on the standalone GET stream).
        related_request_id=ctx.request_id,
    )
    elicited = await ctx.elicit(message="Your name?", schema=Name)
    name = elicited.data.name if elicited.action == "accept" else elicited.action
    return f"{sampled.content.text} / {name}"


server.run(transport="streamable-http")
