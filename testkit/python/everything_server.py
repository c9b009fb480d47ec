"""The reference server of the conformance test (tests/conformance.rs): one MCP server, made
with the official `mcp` 2.x Python SDK's MCPServer, offering what the official conformance
suite's server scenarios ask of a server under test: the `test_*` tools (every content type,
an error, logs and progress during a call, a JSON Schema 2020-12 input schema; those that ask
the client for input are in everything_inputs.py), the `test://` resources and template, the
`test_*` prompts, completions, `logging/setLevel` and resource subscriptions.

It runs in the SDK's default Streamable HTTP mode (sessions, SSE replies, an event store for
resumed streams), in which the SDK answers the 2025 versions with the `initialize` handshake
and 2026-07-28 statelessly, as a tool server on this SDK would. The suite is run against it
directly and through the gateway's `/mcp/{slug}`. Usage: everything_server.py PORT
"""

import asyncio
import base64
import json
import sys
from typing import Annotated

from everything_inputs import PROMPTS, TOOLS
from pydantic import Field

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    JSONRPCMessage,
    PromptReference,
    ResourceTemplateReference,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)

# A 1x1 PNG and a tiny WAV: real media, small enough to read in a log.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class Events(EventStore):
    """Every SSE event kept in memory, so a client that lost a stream can resume it from its
    `Last-Event-ID` (the SSE scenarios close streams on purpose)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        self.events.append((stream_id, len(self.events) + 1, message))
        return str(len(self.events))

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        after = int(last_event_id) if last_event_id.isdigit() else 0
        stream = next((s for s, n, _ in self.events if n == after), None)
        if stream is None:
            return None
        for s, n, message in self.events:
            if s == stream and n > after and message is not None:
                await send_callback(EventMessage(message, str(n)))
        return stream


def json_schema_2020_12_tool() -> str:
    """Lists an input schema in JSON Schema 2020-12 (SEP-1613), which must reach the client
    whole: `$schema`, `$defs` and `additionalProperties` included."""
    return "schema kept"


# The SDK derives a tool's schema from its function; this one's is set as written instead.
schema_tool = Tool.from_function(json_schema_2020_12_tool)
schema_tool.parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

# requestState sealed with a key of this process, so a tampered echo is refused by the SDK.
server = MCPServer(
    name="tollgate-conformance-reference",
    version="1.0.0",
    tools=[schema_tool],
    request_state_security=RequestStateSecurity.ephemeral(),
)
subscribed: set[str] = set()
for f in TOOLS:
    server.tool()(f)
for f in PROMPTS:
    server.prompt()(f)


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


# --- Tools: content of every type ----------------------------------------------------------


@server.tool()
def test_simple_text() -> str:
    """Answers one text block."""
    return "A plain text answer from the reference server."


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Answers one PNG image."""
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Answers one WAV clip."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Answers an embedded text resource."""
    doc = TextResourceContents(uri="test://embedded-resource", mime_type="text/plain", text="Embedded text.")
    return [EmbeddedResource(type="resource", resource=doc)]


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Answers text, an image and a resource together."""
    doc = TextResourceContents(uri="test://mixed-content-resource", mime_type="application/json", text='{"n": 1}')
    return [
        text("Three kinds of content:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=doc),
    ]


@server.tool()
def test_error_handling() -> str:
    """Always fails: the SDK answers a result with isError."""
    raise RuntimeError("this tool fails on purpose")


# --- Tools: messages to the client during a call --------------------------------------------


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages before it answers."""
    for step in ("starting", "working", "done"):
        await ctx.info(f"logging tool: {step}")
        await asyncio.sleep(0.03)
    return "logged three messages"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """The stateless scenario's probe: logs, which a 2026-07-28 server sends only to a request
    whose `_meta` set a log level."""
    await ctx.info("logging probe")
    return "logged once"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress three times before it answers; answers the progress token."""
    for done in (0, 50, 100):
        await ctx.report_progress(progress=done, total=100, message=f"{done} of 100")
        await asyncio.sleep(0.03)
    meta = ctx.request_context.meta if ctx.request_context else None
    return str(meta.get("progress_token") if meta else None)


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE stream mid-call (SEP-1699), so the client must resume it."""
    await ctx.info("before the stream closes")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("after the client resumed")
    return "resumed"


@server.tool()
def test_x_mcp_header(
    region: Annotated[str, Field(description="Sent as Mcp-Param-Region", json_schema_extra={"x-mcp-header": "Region"})] = "-",
) -> str:
    """SEP-2243: an argument mirrored in a header."""
    return f"region={region}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Refuses a client that did not declare sampling, as a JSON-RPC error."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="this tool needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "sampling declared"


# --- Resources ---------------------------------------------------------------------------


@server.resource("test://static-text")
def static_text() -> str:
    """A fixed text resource."""
    return "The static text resource's content."


@server.resource("test://static-binary")
def static_binary() -> bytes:
    """A fixed binary resource (a PNG)."""
    return base64.b64decode(PNG)


@server.resource("test://template/{id}/data")
def templated(id: str) -> str:
    """A resource per id."""
    return json.dumps({"id": id, "templateTest": True})


@server.resource("test://watched-resource")
def watched() -> str:
    """A resource to subscribe to."""
    return "watched content"


# --- Prompts -----------------------------------------------------------------------------


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt with no arguments."""
    return [UserMessage(role="user", content=text("A simple prompt."))]


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [UserMessage(role="user", content=text(f"arg1={arg1}, arg2={arg2}"))]


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt carrying a resource."""
    doc = TextResourceContents(uri=resourceUri, mime_type="text/plain", text="Embedded in a prompt.")
    return [
        UserMessage(role="user", content=EmbeddedResource(type="resource", resource=doc)),
        UserMessage(role="user", content=text("Read the resource above.")),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt carrying an image."""
    return [
        UserMessage(role="user", content=ImageContent(type="image", data=PNG, mime_type="image/png")),
        UserMessage(role="user", content=text("Describe the image above.")),
    ]


# --- Completions, logging level, subscriptions --------------------------------------------


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: CompletionContext | None
) -> Completion:
    """No suggestions: the scenario checks the shape of the answer."""
    return Completion(values=[], total=0, has_more=False)


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    return EmptyResult()


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    subscribed.add(str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    subscribed.discard(str(params.uri))
    return EmptyResult()


# MCPServer has no public hook for these three methods of the handshake era yet.
for method, params, handler in (
    ("logging/setLevel", SetLevelRequestParams, set_level),
    ("resources/subscribe", SubscribeRequestParams, subscribe),
    ("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe),
):
    server._lowlevel_server.add_request_handler(method, params, handler)


if __name__ == "__main__":
    port = int(sys.argv[1])
    asyncio.run(
        server.run_streamable_http_async(host="127.0.0.1", port=port, event_store=Events(), retry_interval=100)
    )
