"""A tool server made with the official `mcp` 2.x Python SDK (MCPServer, stateless, JSON
replies): tools `echo`, and `greet`, which asks for input first as the 2026-07-28 protocol
does (an input-required result: a name to elicit, a line to sample) and greets with the
answers on the retry. It answers both protocol eras (2026-07-28 and the initialize
handshake), as the SDK does. Usage: mcp2_tools.py PORT
"""

import asyncio
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
)

mcp = MCPServer("sdk2-tools")


@mcp.tool()
def echo(text: str) -> str:
    """Echoes its text."""
    return text


@mcp.tool()
async def greet(ctx: Context) -> str | InputRequiredResult:
    """Asks the client for a name and a line first, then greets with them."""
    given = ctx.input_responses or {}
    name, line = given.get("name"), given.get("line")
    if isinstance(name, ElicitResult) and isinstance(line, CreateMessageResult):
        return f"Hello, {(name.content or {}).get('name')}! {line.content.text}"
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    ask_name = ElicitRequest(params=ElicitRequestFormParams(message="Your name?", requested_schema=schema))
    say = [SamplingMessage(role="user", content=TextContent(type="text", text="Say hi"))]
    ask_line = CreateMessageRequest(params=CreateMessageRequestParams(messages=say, max_tokens=10))
    return InputRequiredResult(input_requests={"name": ask_name, "line": ask_line})


if __name__ == "__main__":
    port = int(sys.argv[1])
    asyncio.run(mcp.run_streamable_http_async(host="127.0.0.1", port=port, stateless_http=True, json_response=True))
