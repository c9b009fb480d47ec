"""Runs an agent of the OpenAI Agents SDK (its default model API: Responses) through Tollgate.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT/v1 TOLLGATE_API_KEY=... python openai_agents.py
Model: `m`, whose fake calls the first tool offered until it sees the tool's output. The agent
calls its function tool once and answers; then the same, streamed. Prints TOKENS=<in> <out>.
"""
import asyncio
import os

import openai
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

set_tracing_disabled(True)
client = openai.AsyncOpenAI(base_url=os.environ["TOLLGATE_BASE_URL"], api_key=os.environ["TOLLGATE_API_KEY"], max_retries=0, timeout=20)
set_default_openai_client(client)
calls = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"sunny in {city}"


agent = Agent(name="weather", instructions="Answer with the tool's help.", model="m", tools=[get_weather])


async def main():
    tokens = [0, 0]
    result = await Runner.run(agent, "What is the weather in Paris?")
    assert calls == ["Paris"], calls
    assert result.final_output.startswith("Hello"), result.final_output
    for r in result.raw_responses:
        tokens[0] += r.usage.input_tokens
        tokens[1] += r.usage.output_tokens
    assert len(result.raw_responses) == 2, result.raw_responses
    print("ok run with a function tool")

    streamed = Runner.run_streamed(agent, "And in Oslo?")
    kinds = set()
    async for event in streamed.stream_events():
        kinds.add(event.type)
    assert calls == ["Paris", "Paris"], calls
    assert streamed.final_output.startswith("Hello"), streamed.final_output
    assert "raw_response_event" in kinds, kinds
    for r in streamed.raw_responses:
        tokens[0] += r.usage.input_tokens
        tokens[1] += r.usage.output_tokens
    print("ok streamed run with a function tool")
    print(f"TOKENS={tokens[0]} {tokens[1]}")
    print("sdk: all passed")


asyncio.run(main())
