"""Agent and structured-output frameworks through the zero-config gateway and the mocks, as their docs set them
up (base URL and key only; no markers in the prompts): a plain call, a stream, a tool-calling agent, structured
output, and a repeated prompt whose cache read comes from the framework's own usage object. Installed by
`make test` (the `test` extra, instructor by the Makefile); a missing one skips, naming itself."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from tests.clients.conftest import SYSTEM, WEATHER_PROMPT


class Trip(BaseModel):
    city: str
    nights: int


MOCK_TRIP = Trip(city="mock", nights=1)   # the schema's fixed values (prefixgate/simulation/mock/schema_value.py)


def get_weather(city: str) -> str:
    """The weather in a city."""
    CALLS.append(city)
    return f"Sunny in {city}, 21C"


CALLS: list[str] = []


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()


# ---- LangChain ----------------------------------------------------------------------------------------------

def _langchain(provider: str, gateway: str, key: str):
    if provider == "openai":
        lc = pytest.importorskip("langchain_openai")
        # stream_usage: without it ChatOpenAI's streams carry no usage at all.
        return lc.ChatOpenAI(model="gpt-5.4", base_url=gateway + "/v1", api_key=key, stream_usage=True, max_retries=0)
    lc = pytest.importorskip("langchain_anthropic")
    return lc.ChatAnthropic(model="claude-sonnet-5-5", base_url=gateway, api_key=key, max_tokens=300, max_retries=0)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_langchain_call_stream_and_cache(gateway, key, provider):
    llm = _langchain(provider, gateway, key)
    messages = [("system", SYSTEM), ("human", "Hi")]
    first = llm.invoke(messages)
    assert first.content and first.usage_metadata["input_token_details"].get("cache_read", 0) == 0
    streamed = None
    for chunk in llm.stream(messages):
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed.content and streamed.usage_metadata["input_token_details"]["cache_read"] > 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_langchain_tool_agent_and_structured_output(gateway, key, provider):
    agents = pytest.importorskip("langchain.agents")
    llm = _langchain(provider, gateway, key)
    agent = agents.create_agent(llm, tools=[get_weather])
    result = agent.invoke({"messages": [{"role": "user", "content": WEATHER_PROMPT}]})
    assert CALLS == ["mock"] and result["messages"][-1].content
    # langchain-anthropic warns that Claude 5.5 refuses forced tool calls and advises json_schema (output_config).
    method = "json_schema" if provider == "anthropic" else None
    structured = llm.with_structured_output(Trip, **({"method": method} if method else {}))
    assert structured.invoke("Plan a trip") == MOCK_TRIP


# ---- pydantic-ai --------------------------------------------------------------------------------------------

def _pydantic_ai_model(provider: str, gateway: str, key: str):
    pytest.importorskip("pydantic_ai")
    if provider == "openai":
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
        return OpenAIChatModel("gpt-5.4", provider=OpenAIProvider(base_url=gateway + "/v1", api_key=key))
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    return AnthropicModel("claude-sonnet-5-5", provider=AnthropicProvider(base_url=gateway, api_key=key))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_pydantic_ai_agent_with_a_tool_and_structured_output(gateway, key, provider):
    from pydantic_ai import Agent
    model = _pydantic_ai_model(provider, gateway, key)
    agent = Agent(model, output_type=Trip, tools=[get_weather], instructions=SYSTEM)
    result = agent.run_sync(WEATHER_PROMPT)
    assert CALLS == ["mock"] and result.output == MOCK_TRIP
    again = agent.run_sync(WEATHER_PROMPT)
    assert again.usage.cache_read_tokens > 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_pydantic_ai_text_and_stream(gateway, key, provider):
    from pydantic_ai import Agent
    agent = Agent(_pydantic_ai_model(provider, gateway, key), instructions="Be brief.")
    assert agent.run_sync("Hi").output

    async def streamed() -> str:
        async with agent.run_stream("Hi") as run:
            return "".join([piece async for piece in run.stream_text(delta=True)])
    assert asyncio.run(streamed())


# ---- instructor ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_instructor_response_model_and_cache(gateway, key, provider):
    instructor = pytest.importorskip("instructor")
    if provider == "openai":
        import openai
        client = instructor.from_openai(openai.OpenAI(base_url=gateway + "/v1", api_key=key, max_retries=0))
        args = {"model": "gpt-5.4"}
    elif provider == "gemini":
        from google import genai
        client = instructor.from_genai(genai.Client(api_key=key, http_options={"base_url": gateway}))
        args = {"model": "gemini-3.5-flash"}
    else:
        import anthropic
        client = instructor.from_anthropic(anthropic.Anthropic(base_url=gateway, api_key=key, max_retries=0))
        args = {"model": "claude-sonnet-5-5", "max_tokens": 300}
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Plan a trip"}]
    trip, raw = client.chat.completions.create_with_completion(response_model=Trip, messages=messages, **args)
    assert trip.model_dump() == MOCK_TRIP.model_dump()     # instructor answers with a subclass of Trip
    _, again = client.chat.completions.create_with_completion(response_model=Trip, messages=messages, **args)
    read = {"openai": lambda: again.usage.prompt_tokens_details.cached_tokens,
            "anthropic": lambda: again.usage.cache_read_input_tokens,
            "gemini": lambda: again.usage_metadata.cached_content_token_count}[provider]()
    assert read > 0


# ---- OpenAI Agents SDK (on Chat Completions, and on Responses) ----------------------------------------------

@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_openai_agents_tool_and_output_type(gateway, key, api):
    agents = pytest.importorskip("agents")
    import openai
    agents.set_tracing_disabled(True)        # it would upload traces to OpenAI otherwise
    client = openai.AsyncOpenAI(base_url=gateway + "/v1", api_key=key, max_retries=0)
    model = (agents.OpenAIChatCompletionsModel if api == "chat_completions" else agents.OpenAIResponsesModel)(
        model="gpt-5.4", openai_client=client)
    agent = agents.Agent(name="travel", instructions=SYSTEM, model=model, tools=[agents.function_tool(get_weather)],
                         output_type=Trip)
    result = agents.Runner.run_sync(agent, WEATHER_PROMPT)
    assert CALLS == ["mock"] and result.final_output == MOCK_TRIP
    assert result.context_wrapper.usage.input_tokens_details.cached_tokens > 0    # its second request read the cache


# ---- smolagents ---------------------------------------------------------------------------------------------

def test_smolagents_tool_calling_agent(gateway, key):
    smolagents = pytest.importorskip("smolagents")
    tool = smolagents.tool      # spelled `@tool`: smolagents reads the decorator from the source

    @tool
    def weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name.
        """
        return get_weather(city)

    model = smolagents.OpenAIServerModel(model_id="gpt-5.4", api_base=gateway + "/v1", api_key=key)
    agent = smolagents.ToolCallingAgent(tools=[weather], model=model, max_steps=4, verbosity_level=0)
    answer = agent.run("What is the weather in Paris? Use the weather tool.")
    assert CALLS == ["mock"] and answer == "mock"       # final_answer's argument, the schema's string
