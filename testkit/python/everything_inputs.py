"""The reference server's tools that ask the client for input (see everything_server.py, which
registers them): sampling and elicitation requests during a call (the 2025 versions; the
SEP-1034 defaults and SEP-1330 enum forms), and the 2026-07-28 input-required results (SEP-2322)
of tools and of a prompt, whose answers come back in the retried request.
"""

import json
from typing import Any, Callable

from pydantic import BaseModel, Field

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)

# What the server registers: the functions below, as tools and prompts under their own names.
TOOLS: list[Callable[..., Any]] = []
PROMPTS: list[Callable[..., Any]] = []


def tool(f: Callable[..., Any]) -> Callable[..., Any]:
    TOOLS.append(f)
    return f


def prompt(f: Callable[..., Any]) -> Callable[..., Any]:
    PROMPTS.append(f)
    return f


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def ask_name(message: str = "Your name?") -> ElicitRequest:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def ask_model(prompt: str, max_tokens: int = 64) -> CreateMessageRequest:
    messages = [SamplingMessage(role="user", content=text(prompt))]
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=messages, max_tokens=max_tokens))


@tool
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model (sampling/createMessage) and answers what it said."""
    try:
        answer = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=text(prompt))],
            max_tokens=100,
            # On the call's own stream: the standalone GET stream may not be open.
            related_request_id=ctx.request_id,
        )
    except Exception as e:  # the scenario reads the answer, so say what went wrong
        return f"sampling failed: {e}"
    said = answer.content.text if answer.content.type == "text" else "(not text)"
    return f"LLM response: {said}"


class Reply(BaseModel):
    response: str = Field(description="What the user answers")


@tool
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user (elicitation/create) and answers what they chose."""
    try:
        got = await ctx.elicit(message=message, schema=Reply)
    except Exception as e:
        return f"elicitation failed: {e}"
    data = got.data.model_dump_json() if got.action == "accept" else "{}"
    return f"User response: action={got.action}, content={data}"


class Defaults(BaseModel):
    """SEP-1034: a default for each primitive type."""

    name: str = Field(default="John Doe", description="Name")
    age: int = Field(default=30, description="Age")
    score: float = Field(default=95.5, description="Score")
    status: str = Field(default="active", description="Status", json_schema_extra={"enum": ["active", "inactive", "pending"]})
    verified: bool = Field(default=True, description="Verified")


@tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits a form whose every field has a default."""
    try:
        got = await ctx.elicit(message="Fill in the defaults form", schema=Defaults)
    except Exception as e:
        return f"elicitation failed: {e}"
    return f"action={got.action}, content={got.data.model_dump_json() if got.action == 'accept' else '{}'}"


def options(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


class Enums(BaseModel):
    """SEP-1330: the five ways of writing a choice."""

    untitledSingle: str = Field(description="Plain enum", json_schema_extra={"enum": ["active", "inactive", "pending"]})
    titledSingle: str = Field(
        description="Titled choices",
        json_schema_extra={"oneOf": options(("low", "Low"), ("medium", "Medium"), ("high", "High"))},
    )
    untitledMulti: list[str] = Field(
        description="Several plain choices",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Several titled choices",
        json_schema_extra={"items": {"anyOf": options(("feature", "Feature"), ("bug", "Bug"), ("docs", "Docs"))}},
    )
    legacyEnum: str = Field(
        description="enumNames, the older form",
        json_schema_extra={"enum": ["small", "medium", "large"], "enumNames": ["Small", "Medium", "Large"]},
    )


@tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits a form with every enum form."""
    try:
        got = await ctx.elicit(message="Pick from each list", schema=Enums)
    except Exception as e:
        return f"elicitation failed: {e}"
    return f"action={got.action}, content={got.data.model_dump_json() if got.action == 'accept' else '{}'}"


# --- Tools: 2026-07-28 input-required results (SEP-2322) -----------------------------------


@tool
async def test_streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """The stateless scenario's probe: in 2026-07-28 a server asks for input with an
    input-required result on the call's stream, never with a request of its own there."""
    answer = (ctx.input_responses or {}).get("name")
    if isinstance(answer, ElicitResult):
        return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"
    return InputRequiredResult(input_requests={"name": ask_name()})


@tool
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name first; answers with it once given."""
    answer = (ctx.input_responses or {}).get("user_name")
    if isinstance(answer, ElicitResult):
        return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"
    return InputRequiredResult(input_requests={"user_name": ask_name()})


@tool
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model first; answers what it said."""
    answer = (ctx.input_responses or {}).get("capital_question")
    if isinstance(answer, CreateMessageResult):
        return f"Model said: {answer.content.text if answer.content.type == 'text' else '?'}"
    return InputRequiredResult(input_requests={"capital_question": ask_model("Capital of France?")})


@tool
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks for the client's roots first; answers how many."""
    answer = (ctx.input_responses or {}).get("client_roots")
    if isinstance(answer, ListRootsResult):
        return f"{len(answer.roots)} root(s)"
    return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


def ask_confirm() -> ElicitRequest:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    return ElicitRequest(params=ElicitRequestFormParams(message="Confirm?", requested_schema=schema))


@tool
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Completes only when the client echoes the state it was given."""
    if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "state-1":
        return "state-ok: confirmed"
    return InputRequiredResult(input_requests={"confirm": ask_confirm()}, request_state="state-1")


@tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Asks for three inputs of three kinds at once."""
    if {"user_name", "greeting", "client_roots"} <= (ctx.input_responses or {}).keys():
        return "all three inputs received"
    wanted: dict[str, InputRequest] = {
        "user_name": ask_name(),
        "greeting": ask_model("Say a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    return InputRequiredResult(input_requests=wanted, request_state="three-inputs")


@tool
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Three rounds: a name, then a colour, then the answer; the state says which round."""
    state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    given = ctx.input_responses or {}
    first, second = given.get("step1"), given.get("step2")
    if state.get("round") == 1 and isinstance(first, ElicitResult):
        schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
        colour = ElicitRequest(params=ElicitRequestFormParams(message="Favourite colour?", requested_schema=schema))
        name = (first.content or {}).get("name")
        return InputRequiredResult(input_requests={"step2": colour}, request_state=json.dumps({"round": 2, "name": name}))
    if state.get("round") == 2 and isinstance(second, ElicitResult):
        return f"{state.get('name')} likes {(second.content or {}).get('color')}."
    # First round, or an answer out of order: start again.
    return InputRequiredResult(input_requests={"step1": ask_name("Step 1: your name?")}, request_state=json.dumps({"round": 1}))


@tool
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """Issues a state; the SDK's seal refuses an altered echo before this runs again."""
    if ctx.request_state is None:
        return InputRequiredResult(input_requests={"confirm": ask_confirm()}, request_state="round-1")
    return f"state-ok: {ctx.request_state}"


@tool
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Asks only for the kinds of input the client declared it can give."""
    caps = ctx.client_capabilities
    wanted: dict[str, InputRequest] = {}
    if caps is None or caps.sampling is not None:
        wanted["sample"] = ask_model("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        wanted["ask"] = ask_name()
    return InputRequiredResult(input_requests=wanted, request_state="by-capability")


@prompt
async def test_input_required_result_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """prompts/get answered with an input-required result first (SEP-2322, not a tool)."""
    answer = (ctx.input_responses or {}).get("user_context")
    if isinstance(answer, ElicitResult):
        return [UserMessage(role="user", content=text(f"Context: {(answer.content or {}).get('context', '?')}"))]
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    ask = ElicitRequest(params=ElicitRequestFormParams(message="Which context?", requested_schema=schema))
    return InputRequiredResult(input_requests={"user_context": ask})
