"""Providers against a real local HTTP server speaking each wire format."""

from __future__ import annotations

import json
import socket
import traceback
from pathlib import Path

import httpx
import pytest

from tests.pipeline.fake_llm_server import (
    FakeLLMServer,
    Reply,
    ToolUse,
    anthropic_error,
    anthropic_prompt_too_long,
    anthropic_text,
    anthropic_tool_use,
    malformed,
    openai_context_overflow,
    openai_error,
    openai_text,
    openai_tool_calls,
    openai_usage_details,
    slow,
)
from turnledger.pipeline.providers.anthropic import AnthropicProvider, messages_url
from turnledger.pipeline.providers.base import (
    ChatRequest,
    ChatResponse,
    ProviderError,
    ToolSpec,
    Usage,
)
from turnledger.pipeline.providers.factory import (
    MissingApiKeyError,
    ProviderConfigError,
    make_provider,
)
from turnledger.pipeline.providers.openai_compatible import (
    OpenAICompatibleProvider,
    chat_completions_url,
)
from turnledger.pipeline.providers.scripted import (
    ScriptedProvider,
    ScriptExhaustedError,
    ScriptFormatError,
)
from turnledger.policies.messages import ToolCall, ToolResult, make_message

KEY = "sk-PLANTED-key-0123456789abcdef"
# No known secret prefix: only the explicit replacement can remove this one.
PLAIN_KEY = "PLANTEDplainKEY0123456789"
TIMEOUT = 0.2

CALLS = (
    ToolCall(id="call_a", name="memory_recall", arguments='{"query":"due"}'),
    ToolCall(id="call_b", name="clock", arguments="{}"),
)
RESULTS = (
    ToolResult(call_id="call_a", content="report due Friday"),
    ToolResult(call_id="call_b", content="clock broke", is_error=True),
)
OPENING = (
    make_message("system", "You are terse."),
    make_message("user", "What is due?"),
    make_message("assistant", "Checking.", tool_calls=CALLS),
)
# OpenAI-style rows: one tool message per result.
TOOL_ROWS = (
    *OPENING,
    make_message("tool", tool_results=RESULTS[:1]),
    make_message("tool", tool_results=RESULTS[1:]),
)
# Anthropic-style carrier: one user message holding both results.
CARRIER = (*OPENING, make_message("user", tool_results=RESULTS))
RECALL = ToolSpec(
    name="memory_recall",
    description="Search memory.",
    parameters={"type": "object", "properties": {"query": {"type": "string"}}},
)
HELLO = ChatRequest(messages=(make_message("user", "hi"),))


@pytest.fixture(name="llm_server")
def _llm_server():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(name="openai")
async def _openai(llm_server):
    provider = OpenAICompatibleProvider(
        llm_server.openai_base_url, "gpt-test", api_key=KEY, timeout=TIMEOUT
    )
    yield provider
    await provider.aclose()


@pytest.fixture(name="anthropic")
async def _anthropic(llm_server):
    provider = AnthropicProvider(
        llm_server.url, model="claude-test", api_key=KEY, timeout=TIMEOUT
    )
    yield provider
    await provider.aclose()


async def failure(provider, request=HELLO) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    return caught.value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# OpenAI-compatible: the request.


async def test_openai_body_is_the_chat_completions_wire_format(openai, llm_server):
    """Tools, assistant tool_calls and tool rows are sent exactly as OpenAI wants."""
    llm_server.queue_openai(openai_text("Friday."))
    request = ChatRequest(
        messages=TOOL_ROWS, tools=(RECALL,), max_output_tokens=256, temperature=0.2
    )
    await openai.complete(request)
    (sent,) = llm_server.requests
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is due?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {
                            "name": "memory_recall",
                            "arguments": '{"query":"due"}',
                        },
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "clock", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "report due Friday"},
            {"role": "tool", "tool_call_id": "call_b", "content": "clock broke"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "memory_recall",
                    "description": "Search memory.",
                    "parameters": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                    },
                },
            }
        ],
        "max_tokens": 256,
        "temperature": 0.2,
    }


async def test_openai_body_omits_unset_options(openai, llm_server):
    """No tools, max_tokens or temperature keys when the request sets none."""
    llm_server.queue_openai(openai_text("hello"))
    await openai.complete(HELLO)
    assert llm_server.requests[0].body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
    }


async def test_openai_headers_carry_the_bearer_key_and_extra_headers(llm_server):
    """The key goes in Authorization: Bearer; extra headers are sent too."""
    llm_server.queue_openai(openai_text("a"), openai_text("b"))
    keyed = OpenAICompatibleProvider(
        llm_server.openai_base_url,
        "m",
        api_key=KEY,
        extra_headers={"OpenAI-Organization": "org-1"},
    )
    keyless = OpenAICompatibleProvider(llm_server.openai_base_url, "m")
    await keyed.complete(HELLO)
    await keyless.complete(HELLO)
    await keyed.aclose()
    await keyless.aclose()
    with_key, without_key = llm_server.requests
    assert with_key.headers["authorization"] == f"Bearer {KEY}"
    assert with_key.headers["openai-organization"] == "org-1"
    assert with_key.headers["content-type"] == "application/json"
    assert "authorization" not in without_key.headers


@pytest.mark.parametrize(
    ("base", "endpoint"),
    [
        ("http://h:8000", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/", "http://h:8000/v1/chat/completions"),
        ("http://h:11434/v1", "http://h:11434/v1/chat/completions"),
        (
            "https://openrouter.ai/api/v1/",
            "https://openrouter.ai/api/v1/chat/completions",
        ),
        ("http://h/custom/chat/completions", "http://h/custom/chat/completions"),
        (
            "http://h/v1?api-version=2024",
            "http://h/v1/chat/completions?api-version=2024",
        ),
    ],
)
def test_chat_completions_url_rule(base, endpoint):
    """As-is when it ends with /chat/completions, appended to a path, else /v1/..."""
    assert chat_completions_url(base) == endpoint


async def test_openai_posts_to_the_url_the_rule_gives(llm_server):
    """A bare host and a full endpoint both reach the server on the right path."""
    llm_server.queue_openai(openai_text("a"), openai_text("b"))
    bare = OpenAICompatibleProvider(llm_server.url, "m")
    full = OpenAICompatibleProvider(f"{llm_server.url}/x/chat/completions", "m")
    await bare.complete(HELLO)
    await full.complete(HELLO)
    await bare.aclose()
    await full.aclose()
    assert [r.path for r in llm_server.requests] == [
        "/v1/chat/completions",
        "/x/chat/completions",
    ]


@pytest.mark.parametrize("base", ["ftp://h/v1", "not a url", "http://", "http://[::1"])
def test_base_url_must_be_http(base):
    """A base URL that is not http(s) with a host is a configuration error."""
    with pytest.raises(ProviderConfigError, match="Expected an http"):
        OpenAICompatibleProvider(base, "m")
    with pytest.raises(ProviderConfigError, match="Expected an http"):
        AnthropicProvider(base, model="m")


# OpenAI-compatible: the answer.


async def test_openai_text_answer_with_usage_including_cached(openai, llm_server):
    """Text, model, finish reason and usage (cached tokens included) are read."""
    llm_server.queue_openai(openai_text("Friday.", usage=(1200, 5, 1024)))
    assert await openai.complete(HELLO) == ChatResponse(
        text="Friday.",
        usage=Usage(input_tokens=1200, output_tokens=5, cached_input_tokens=1024),
        model="gpt-test",
        finish_reason="stop",
    )


async def test_openai_parallel_tool_calls(openai, llm_server):
    """Parallel calls come back in order, arguments as the exact JSON text sent."""
    llm_server.queue_openai(
        openai_tool_calls(
            ToolUse("call_1", "memory_recall", '{"query": "due"}'),
            ToolUse("call_2", "clock", "{}"),
            usage=(50, 20),
            model="gpt-test-2024",
        )
    )
    response = await openai.complete(HELLO)
    assert response == ChatResponse(
        text="",
        tool_calls=(
            ToolCall(id="call_1", name="memory_recall", arguments='{"query": "due"}'),
            ToolCall(id="call_2", name="clock", arguments="{}"),
        ),
        usage=Usage(input_tokens=50, output_tokens=20),
        model="gpt-test-2024",
        finish_reason="tool_calls",
    )


async def test_openai_lenient_servers_are_read(openai, llm_server):
    """Object arguments, a missing call id, "stop" with calls and no usage still parse."""
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "on it"}],
        "tool_calls": [
            {"function": {"name": "clock", "arguments": {"tz": "UTC"}}},
            {"id": "c2", "function": {"name": "ping"}},
        ],
    }
    llm_server.queue_openai(
        Reply(body={"choices": [{"message": message, "finish_reason": "stop"}]})
    )
    response = await openai.complete(HELLO)
    call, bare = response.tool_calls
    assert (call.name, call.arguments) == ("clock", '{"tz":"UTC"}')
    assert call.id.startswith("call_")
    assert bare == ToolCall(id="c2", name="ping", arguments="{}")
    assert (response.text, response.finish_reason, response.usage) == (
        "on it",
        "tool_calls",
        None,
    )


async def test_openai_length_finish_reason_passes_through(openai, llm_server):
    """A truncated answer keeps finish_reason "length"."""
    llm_server.queue_openai(openai_text("cut", finish_reason="length"))
    assert (await openai.complete(HELLO)).finish_reason == "length"


# OpenAI-compatible: errors.

VLLM_OVERFLOW = Reply(
    status=400,
    body={
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However,"
        " you requested 5000 tokens (4000 in the messages, 1000 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
)
LLAMA_CPP_OVERFLOW = Reply(
    status=400,
    body={
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
        }
    },
)


@pytest.mark.parametrize(
    "case",
    [
        (openai_context_overflow(), "context_overflow", 400, False),
        (VLLM_OVERFLOW, "context_overflow", 400, False),
        (LLAMA_CPP_OVERFLOW, "context_overflow", 400, False),
        (
            Reply(status=413, body=b"Request Entity Too Large"),
            "context_overflow",
            413,
            False,
        ),
        (openai_error(400, "Invalid 'messages[1].role'"), "bad_request", 400, False),
        (
            openai_error(404, "The model `nope` does not exist"),
            "bad_request",
            404,
            False,
        ),
        (
            openai_error(401, "Incorrect API key provided", code="invalid_api_key"),
            "auth",
            401,
            False,
        ),
        (openai_error(403, "Country not supported"), "auth", 403, False),
        (
            openai_error(
                429, "Rate limit reached", type="requests", code="rate_limit_exceeded"
            ),
            "rate_limit",
            429,
            True,
        ),
        (
            openai_error(500, "The server had an error", type="server_error"),
            "server",
            500,
            True,
        ),
        (Reply(status=502, body=b"<html>Bad Gateway</html>"), "server", 502, True),
        # Go servers (Ollama) say "context deadline exceeded" on timeouts: no trim.
        (
            Reply(status=500, body={"error": "context deadline exceeded"}),
            "server",
            500,
            True,
        ),
        (Reply(status=408, body=[1, 2]), "timeout", 408, True),
        (malformed(), "server", 200, False),
        (Reply(body={"choices": []}), "server", 200, False),
        (Reply(body={"choices": [{"message": {"content": 3}}]}), "server", 200, False),
    ],
)
async def test_openai_errors_are_classified(openai, llm_server, case):
    """Each failure becomes a ProviderError of the right kind, status and retryability."""
    reply, *expected = case
    llm_server.queue_openai(reply)
    error = await failure(openai)
    assert [error.kind, error.status, error.retryable] == expected


async def test_openai_overflow_message_quotes_the_provider(openai, llm_server):
    """The message names the provider, status, code and the provider's own words."""
    llm_server.queue_openai(openai_context_overflow())
    error = await failure(openai)
    assert str(error) == (
        "openai-compatible returned HTTP 400 (context_length_exceeded): This model's"
        " maximum context length is 128000 tokens. However, your messages resulted"
        " in 130017 tokens. Please reduce the length of the messages."
    )


async def test_long_error_bodies_are_cut(openai, llm_server):
    """Only the first 500 characters of a provider's message are repeated."""
    llm_server.queue_openai(openai_error(400, "x" * 2000))
    assert str(await failure(openai)) == (
        "openai-compatible returned HTTP 400 (invalid_request_error): "
        + "x" * 500
        + "\u2026"
    )


async def test_malformed_body_names_where_it_broke(openai, llm_server):
    """A 200 whose body is not the expected JSON says what was expected."""
    llm_server.queue_openai(Reply(body={"choices": [{"message": {"content": 3}}]}))
    error = await failure(openai)
    assert str(error) == (
        f"Expected JSON in the openai-compatible answer from {openai.url} (HTTP 200),"
        " found a body that does not decode: Expected `str | array | null`, got"
        " `int` - at `$.choices[0].message.content`"
    )


async def test_negative_token_counts_are_a_malformed_body(
    openai, anthropic, llm_server
):
    """A negative count makes the body malformed: a typed, located error, never priced."""
    llm_server.queue_openai(openai_text("ok", usage=(10, 5, 0, -1)))
    error = await failure(openai)
    assert (error.kind, error.retryable) == ("server", False)
    assert "found a body that does not decode" in str(error)
    assert "Expected `int` >= 0 - at" in str(error)
    assert "$.usage.completion_tokens_details.reasoning_tokens" in str(error)
    llm_server.queue_anthropic(anthropic_text("ok", usage=(10, 5, 0, -7)))
    error = await failure(anthropic)
    assert (error.kind, error.retryable) == ("server", False)
    assert "$.usage.cache_creation_input_tokens" in str(error)


async def test_openai_timeout_is_honoured(openai, llm_server):
    """A server slower than the timeout gives a retryable timeout error."""
    llm_server.queue_openai(slow(openai_text("late")))
    error = await failure(openai)
    assert (error.kind, error.retryable, error.status) == ("timeout", True, None)
    assert str(error) == (
        f"openai-compatible did not answer {openai.url} within 0.2 s (ReadTimeout)"
    )


async def test_connection_refused_is_a_network_error():
    """Nothing listening gives a retryable network error."""
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{free_port()}/v1", "m")
    error = await failure(provider)
    await provider.aclose()
    assert (error.kind, error.retryable) == ("network", True)
    assert str(error).startswith(
        f"openai-compatible could not reach {provider.url} (ConnectError"
    )


# Anthropic: the request.

ANTHROPIC_MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "What is due?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {
                "type": "tool_use",
                "id": "call_a",
                "name": "memory_recall",
                "input": {"query": "due"},
            },
            {"type": "tool_use", "id": "call_b", "name": "clock", "input": {}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_a",
                "content": "report due Friday",
                "is_error": False,
            },
            {
                "type": "tool_result",
                "tool_use_id": "call_b",
                "content": "clock broke",
                "is_error": True,
            },
        ],
    },
]


@pytest.mark.parametrize("history", [TOOL_ROWS, CARRIER], ids=["tool-rows", "carrier"])
async def test_anthropic_body_is_the_messages_wire_format(
    anthropic, llm_server, history
):
    """System apart, tool_use blocks, then every tool_result in the next user turn."""
    llm_server.queue_anthropic(anthropic_text("Friday."))
    request = ChatRequest(messages=history, tools=(RECALL,), temperature=0.0)
    await anthropic.complete(request)
    (sent,) = llm_server.requests
    assert sent.path == "/v1/messages"
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "You are terse.",
        "messages": ANTHROPIC_MESSAGES,
        "tools": [
            {
                "name": "memory_recall",
                "description": "Search memory.",
                "input_schema": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                },
            }
        ],
        "temperature": 0.0,
    }


async def test_anthropic_body_omits_empty_system_and_uses_the_request_cap(
    anthropic, llm_server
):
    """No system key without a system message; max_output_tokens wins over the default."""
    llm_server.queue_anthropic(anthropic_text("hello"))
    await anthropic.complete(ChatRequest(messages=HELLO.messages, max_output_tokens=64))
    assert llm_server.requests[0].body == {
        "model": "claude-test",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


async def test_anthropic_headers_carry_the_key_and_version(anthropic, llm_server):
    """x-api-key and anthropic-version are sent; no Authorization header."""
    llm_server.queue_anthropic(anthropic_text("ok"))
    await anthropic.complete(HELLO)
    headers = llm_server.requests[0].headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers


@pytest.mark.parametrize(
    ("base", "endpoint"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("http://h:9/", "http://h:9/v1/messages"),
        ("http://h:9/proxy/v1", "http://h:9/proxy/v1/messages"),
        ("http://h:9/proxy/v1/messages", "http://h:9/proxy/v1/messages"),
    ],
)
def test_messages_url_rule(base, endpoint):
    """/v1/messages is appended unless the URL already ends with /v1 or /messages."""
    assert messages_url(base) == endpoint


async def test_openai_reasoning_tokens_are_read(openai, llm_server):
    """completion_tokens_details.reasoning_tokens is the reasoning part of the output."""
    llm_server.queue_openai(openai_text("Friday.", usage=(1200, 500, 1024, 448)))
    assert (await openai.complete(HELLO)).usage == Usage(
        input_tokens=1200,
        output_tokens=500,
        cached_input_tokens=1024,
        reasoning_tokens=448,
    )


async def test_openai_cache_writes_are_read_openrouter_style(openai, llm_server):
    """prompt_tokens_details.cache_write_tokens (OpenRouter) is the cache-write part."""
    llm_server.queue_openai(
        openai_usage_details(
            "ok",
            prompt_tokens=194,
            completion_tokens=2,
            prompt_tokens_details={
                "cached_tokens": 0,
                "cache_write_tokens": 100,
                "audio_tokens": 0,
            },
            completion_tokens_details={"reasoning_tokens": 0},
        )
    )
    assert (await openai.complete(HELLO)).usage == Usage(
        input_tokens=194, output_tokens=2, cache_write_tokens=100
    )


async def test_openai_null_usage_details_read_as_zero(openai, llm_server):
    """Servers that send null details (vLLM, llama.cpp) report no cache or reasoning."""
    reply = openai_text("ok", usage=(10, 2))
    reply.body["usage"]["prompt_tokens_details"] = None
    reply.body["usage"]["completion_tokens_details"] = None
    llm_server.queue_openai(reply)
    assert (await openai.complete(HELLO)).usage == Usage(
        input_tokens=10, output_tokens=2
    )


# Anthropic: the answer.


async def test_anthropic_parallel_tool_use_and_usage(anthropic, llm_server):
    """tool_use blocks become calls in order; usage counts cached input as input."""
    llm_server.queue_anthropic(
        anthropic_tool_use(
            ToolUse("toolu_1", "memory_recall", {"query": "due"}),
            ToolUse("toolu_2", "clock", {}),
            text="Looking.",
            usage=(100, 30, 900),
        )
    )
    assert await anthropic.complete(HELLO) == ChatResponse(
        text="Looking.",
        tool_calls=(
            ToolCall(id="toolu_1", name="memory_recall", arguments='{"query":"due"}'),
            ToolCall(id="toolu_2", name="clock", arguments="{}"),
        ),
        usage=Usage(input_tokens=1000, output_tokens=30, cached_input_tokens=900),
        model="claude-test",
        finish_reason="tool_calls",
    )


async def test_anthropic_cache_writes_count_as_input(anthropic, llm_server):
    """cache_creation_input_tokens are input tokens, not cached ones."""
    body = {
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 2,
            "cache_creation_input_tokens": 500,
            "cache_read_input_tokens": 0,
        },
    }
    llm_server.queue_anthropic(Reply(body=body))
    assert (await anthropic.complete(HELLO)).usage == Usage(
        input_tokens=510, output_tokens=2, cached_input_tokens=0, cache_write_tokens=500
    )


async def test_anthropic_cache_reads_and_writes_are_both_reported(
    anthropic, llm_server
):
    """A call that reads 900 cached tokens and writes 400 reports both parts."""
    llm_server.queue_anthropic(anthropic_text("ok", usage=(100, 30, 900, 400)))
    assert (await anthropic.complete(HELLO)).usage == Usage(
        input_tokens=1400,
        output_tokens=30,
        cached_input_tokens=900,
        cache_write_tokens=400,
        reasoning_tokens=0,
    )
    assert llm_server.requests[-1].route == "anthropic"  # over a real socket


async def test_anthropic_skips_blocks_it_does_not_model(anthropic, llm_server):
    """Thinking blocks are skipped; text blocks are joined."""
    content = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Fri"},
        {"type": "text", "text": "day."},
    ]
    llm_server.queue_anthropic(
        Reply(body={"content": content, "stop_reason": "end_turn"})
    )
    response = await anthropic.complete(HELLO)
    assert (response.text, response.tool_calls, response.usage) == ("Friday.", (), None)


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "refusal"),
    ],
)
async def test_anthropic_stop_reasons_are_normalised(
    anthropic, llm_server, stop_reason, finish_reason
):
    """Anthropic's stop reasons map to the neutral ones; unknown ones pass through."""
    llm_server.queue_anthropic(anthropic_text("x", stop_reason=stop_reason))
    assert (await anthropic.complete(HELLO)).finish_reason == finish_reason


# Anthropic: errors.


@pytest.mark.parametrize(
    "case",
    [
        (anthropic_prompt_too_long(), "context_overflow", 400, False),
        (
            anthropic_error(
                400,
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: 198000 + 4096 > 200000",
            ),
            "context_overflow",
            400,
            False,
        ),
        (
            anthropic_error(
                413, "request_too_large", "Request exceeds the maximum size"
            ),
            "context_overflow",
            413,
            False,
        ),
        (
            anthropic_error(
                400, "invalid_request_error", "messages: roles must alternate"
            ),
            "bad_request",
            400,
            False,
        ),
        (
            anthropic_error(401, "authentication_error", "invalid x-api-key"),
            "auth",
            401,
            False,
        ),
        (
            anthropic_error(403, "permission_error", "no access to this model"),
            "auth",
            403,
            False,
        ),
        (
            anthropic_error(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
            "rate_limit",
            429,
            True,
        ),
        (
            anthropic_error(500, "api_error", "Internal server error"),
            "server",
            500,
            True,
        ),
        (anthropic_error(529, "overloaded_error", "Overloaded"), "server", 529, True),
        (malformed(), "server", 200, False),
    ],
)
async def test_anthropic_errors_are_classified(anthropic, llm_server, case):
    """Each failure becomes a ProviderError of the right kind, status and retryability."""
    reply, *expected = case
    llm_server.queue_anthropic(reply)
    error = await failure(anthropic)
    assert [error.kind, error.status, error.retryable] == expected


async def test_anthropic_overflow_message_quotes_the_provider(anthropic, llm_server):
    """The message names the provider, status, error type and Anthropic's words."""
    llm_server.queue_anthropic(anthropic_prompt_too_long())
    assert str(await failure(anthropic)) == (
        "anthropic returned HTTP 400 (invalid_request_error): prompt is too long:"
        " 210000 tokens > 200000 maximum"
    )


async def test_anthropic_timeout_is_honoured(anthropic, llm_server):
    """A server slower than the timeout gives a retryable timeout error."""
    llm_server.queue_anthropic(slow(anthropic_text("late")))
    error = await failure(anthropic)
    assert (error.kind, error.retryable) == ("timeout", True)


# Keys never leak.


def echo_key(request):
    """An error that repeats every header and the URL back, key included."""
    return openai_error(401, f"bad key {json.dumps(request.headers)} at {request.path}")


def echo_key_anthropic(request):
    return anthropic_error(500, "api_error", f"bad key {request.headers['x-api-key']}")


def assert_key_absent(error: ProviderError, key: str) -> None:
    assert error.__cause__ is None
    assert error.__context__ is None
    shown = [
        str(error),
        repr(error),
        repr(error.args),
        "".join(traceback.format_exception(error)),
    ]
    for text in shown:
        assert key not in text
        assert key[6:] not in text


@pytest.mark.parametrize("key", [KEY, PLAIN_KEY])
async def test_openai_key_never_reaches_errors_or_repr(llm_server, key):
    """An error body echoing the key, a timeout and a refused connection stay key-free."""
    provider = OpenAICompatibleProvider(
        llm_server.openai_base_url, "m", api_key=key, timeout=TIMEOUT
    )
    llm_server.queue_openai(echo_key, slow(openai_text("late")))
    echoed = await failure(provider)
    timed_out = await failure(provider)
    await provider.aclose()
    refused = OpenAICompatibleProvider(
        f"http://127.0.0.1:{free_port()}/v1", "m", api_key=key
    )
    unreachable = await failure(refused)
    await refused.aclose()
    assert "bad key" in str(echoed)
    assert "[REDACTED]" in str(echoed)
    for error in (echoed, timed_out, unreachable):
        assert_key_absent(error, key)
    assert key not in repr(provider)
    assert repr(provider) == (
        f"OpenAICompatibleProvider(url='{provider.url}', model='m')"
    )


@pytest.mark.parametrize("key", [KEY, PLAIN_KEY])
async def test_anthropic_key_never_reaches_errors_or_repr(llm_server, key):
    """An Anthropic error echoing the key is redacted."""
    provider = AnthropicProvider(llm_server.url, model="c", api_key=key)
    llm_server.queue_anthropic(echo_key_anthropic)
    error = await failure(provider)
    await provider.aclose()
    assert str(error) == "anthropic returned HTTP 500 (api_error): bad key [REDACTED]"
    assert_key_absent(error, key)
    assert key not in repr(provider)


async def test_placeholder_keys_do_not_garble_messages(llm_server):
    """A dummy key such as "x" (local servers) is not replaced in every word."""
    provider = OpenAICompatibleProvider(llm_server.openai_base_url, "m", api_key="x")
    llm_server.queue_openai(openai_error(400, "max_tokens exceeds the limit"))
    error = await failure(provider)
    await provider.aclose()
    assert str(error) == (
        "openai-compatible returned HTTP 400 (invalid_request_error):"
        " max_tokens exceeds the limit"
    )


async def test_secret_extra_headers_are_redacted_too(llm_server):
    """A gateway key passed as an extra header is redacted like the API key."""
    provider = OpenAICompatibleProvider(
        llm_server.openai_base_url, "m", extra_headers={"api-key": PLAIN_KEY}
    )
    llm_server.queue_openai(echo_key)
    error = await failure(provider)
    await provider.aclose()
    assert_key_absent(error, PLAIN_KEY)


async def test_providers_describe_themselves(llm_server):
    """name, model and url are what the engine and the ledger record."""
    openai = OpenAICompatibleProvider(llm_server.url, "gpt-test")
    anthropic = AnthropicProvider(model="claude-test")
    described = [(p.name, p.model, p.url) for p in (openai, anthropic)]
    await openai.aclose()
    await anthropic.aclose()
    assert described == [
        ("openai-compatible", "gpt-test", f"{llm_server.url}/v1/chat/completions"),
        ("anthropic", "claude-test", "https://api.anthropic.com/v1/messages"),
    ]


async def test_anthropic_without_a_key_sends_no_key_header(llm_server):
    """A keyless Anthropic-compatible proxy gets no x-api-key header."""
    llm_server.queue_anthropic(anthropic_text("ok"))
    async with httpx.AsyncClient() as client:
        provider = AnthropicProvider(llm_server.url, model="c", client=client)
        await provider.complete(HELLO)
        await provider.aclose()
        assert not client.is_closed
    assert "x-api-key" not in llm_server.requests[0].headers


async def test_a_given_client_is_used_and_left_open(llm_server):
    """A caller's client is used for requests and not closed by aclose()."""
    llm_server.queue_openai(openai_text("ok"))
    async with httpx.AsyncClient() as client:
        provider = OpenAICompatibleProvider(
            llm_server.openai_base_url, "m", client=client
        )
        await provider.complete(HELLO)
        await provider.aclose()
        assert not client.is_closed


# Scripted.


async def test_scripted_plays_steps_in_order_and_records_requests():
    """Answers, errors and callables are played in order; every request is kept."""
    overflow = ProviderError("context_overflow", "too long", status=400)
    seen = []

    def answer(request):
        seen.append(request)
        return ChatResponse(text=f"{len(request.messages)} messages", model="own")

    provider = ScriptedProvider([ChatResponse(text="one"), overflow, answer])
    first = await provider.complete(HELLO)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(HELLO)
    retry = ChatRequest(messages=TOOL_ROWS)
    third = await provider.complete(retry)
    assert first == ChatResponse(text="one", model="scripted-1")
    assert caught.value is overflow
    assert third == ChatResponse(text="5 messages", model="own")
    assert seen == [retry]
    assert provider.requests == [HELLO, HELLO, retry]
    assert (provider.name, provider.model, provider.remaining) == (
        "scripted",
        "scripted-1",
        0,
    )


async def test_scripted_runs_out_with_a_typed_error():
    """A request after the last step raises ScriptExhaustedError and is recorded."""
    provider = ScriptedProvider([ChatResponse(text="only")], source="the demo script")
    await provider.complete(HELLO)
    with pytest.raises(ScriptExhaustedError) as caught:
        await provider.complete(HELLO)
    assert isinstance(caught.value, ProviderError)
    assert caught.value.kind == "bad_request"
    assert str(caught.value) == (
        "Expected at most 1 requests to the demo script, found request 2"
    )
    assert len(provider.requests) == 2
    assert repr(provider) == (
        "ScriptedProvider(source='the demo script', model='scripted-1', played=1/1)"
    )


TOML_SCRIPT = """
model = "scripted-demo"

[[steps]]
text = "Let me check."
[[steps.tool_calls]]
name = "memory_recall"
arguments = { query = "deadline" }
[[steps.tool_calls]]
name = "clock"
id = "call_clock"
arguments = '{"tz": "UTC"}'
[steps.usage]
input_tokens = 120
output_tokens = 14
cached_input_tokens = 100
cache_write_tokens = 20
reasoning_tokens = 9

[[steps]]
error = "context_overflow"

[[steps]]
error = "rate_limit"
message = "slow down"
status = 503
retryable = false

[[steps]]
text = "Friday."
"""


def script_steps():
    return [
        ChatResponse(
            text="Let me check.",
            tool_calls=(
                ToolCall(
                    id="call_1_1",
                    name="memory_recall",
                    arguments='{"query":"deadline"}',
                ),
                ToolCall(id="call_clock", name="clock", arguments='{"tz": "UTC"}'),
            ),
            usage=Usage(
                input_tokens=120,
                output_tokens=14,
                cached_input_tokens=100,
                cache_write_tokens=20,
                reasoning_tokens=9,
            ),
            model="scripted-demo",
            finish_reason="tool_calls",
        ),
        ("context_overflow", "scripted context_overflow error (step 2)", 400, False),
        ("rate_limit", "slow down", 503, False),
        ChatResponse(text="Friday.", model="scripted-demo"),
    ]


async def play(provider, count):
    played = []
    for _ in range(count):
        try:
            played.append(await provider.complete(HELLO))
        except ProviderError as e:
            played.append((e.kind, str(e), e.status, e.retryable))
    return played


async def test_script_file_toml(tmp_path):
    """A TOML script plays its answers and errors, with documented defaults."""
    path = tmp_path / "demo.toml"
    path.write_text(TOML_SCRIPT)
    provider = ScriptedProvider.from_file(path)
    assert provider.model == "scripted-demo"
    assert await play(provider, 4) == script_steps()


async def test_script_file_json_object_and_list(tmp_path):
    """The same script in JSON, as an object or a bare list, plays the same."""
    import tomllib

    document = tomllib.loads(TOML_SCRIPT)
    as_object = tmp_path / "demo.json"
    as_object.write_text(json.dumps(document))
    as_list = tmp_path / "steps.json"
    as_list.write_text(json.dumps(document["steps"]))
    assert await play(ScriptedProvider.from_file(as_object), 4) == script_steps()
    from_list = ScriptedProvider.from_file(as_list, model="scripted-demo")
    assert await play(from_list, 4) == script_steps()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[{"txt": "typo"}]',
            (
                "Expected a script file at {path} (see the scripted provider), Object"
                " contains unknown field `txt` - at `$[0]`"
            ),
        ),
        (
            '[{"error": "meltdown"}]',
            (
                "Expected a script file at {path} (see the scripted provider), Invalid"
                " enum value 'meltdown' - at `$[0].error`"
            ),
        ),
        (
            '[{"error": "auth", "text": "and an answer"}]',
            (
                "Expected step 1 of {path} to be an error or an answer, found a 'auth'"
                " error with text, tool_calls, usage or finish_reason"
            ),
        ),
        (
            "{not json",
            (
                "Expected a script file at {path} (see the scripted provider), JSON is"
                " malformed: object keys must be strings (byte 1)"
            ),
        ),
        (
            '[{"text": "hi", "usage": {"reasoning_tokens": -2}}]',
            (
                "Expected a script file at {path} (see the scripted provider), Expected"
                " `int` >= 0 - at `$[0].usage.reasoning_tokens`"
            ),
        ),
    ],
)
def test_script_file_errors_name_the_file_and_place(tmp_path, text, message):
    """A bad script file raises ScriptFormatError saying where."""
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ScriptFormatError) as caught:
        ScriptedProvider.from_file(path)
    assert str(caught.value) == message.format(path=path)


async def test_recorded_session_replays_assistant_messages():
    """from_messages answers each request with the next assistant message."""
    provider = ScriptedProvider.from_messages(
        [*TOOL_ROWS, make_message("assistant", "Friday.")]
    )
    assert await play(provider, 2) == [
        ChatResponse(
            text="Checking.",
            tool_calls=CALLS,
            model="scripted-1",
            finish_reason="tool_calls",
        ),
        ChatResponse(text="Friday.", model="scripted-1"),
    ]


# Factory.


async def test_factory_builds_a_scripted_provider(tmp_path):
    """kind=scripted loads the script; the model setting overrides the file's."""
    path = tmp_path / "demo.toml"
    path.write_text(TOML_SCRIPT)
    provider = make_provider("scripted", model="m2", script=str(path))
    assert isinstance(provider, ScriptedProvider)
    assert provider.model == "m2"


async def test_factory_reads_keys_from_the_environment(llm_server):
    """The named variable's value is sent as the key and never shown."""
    env = {"FAKE_OPENAI_KEY": PLAIN_KEY, "ANTHROPIC_API_KEY": KEY}
    openai = make_provider(
        "openai-compatible",
        model="m",
        base_url=llm_server.openai_base_url,
        api_key_env="FAKE_OPENAI_KEY",
        environ=env,
    )
    anthropic = make_provider(
        "anthropic", model="c", base_url=llm_server.url, environ=env
    )
    llm_server.queue_openai(openai_text("ok"))
    llm_server.queue_anthropic(anthropic_text("ok"))
    await openai.complete(HELLO)
    await anthropic.complete(HELLO)
    await openai.aclose()
    await anthropic.aclose()
    sent_openai, sent_anthropic = llm_server.requests
    assert sent_openai.headers["authorization"] == f"Bearer {PLAIN_KEY}"
    assert sent_anthropic.headers["x-api-key"] == KEY


async def test_factory_local_server_needs_no_key(llm_server):
    """An OpenAI-compatible server other than api.openai.com works without a key."""
    provider = make_provider(
        "openai-compatible",
        model="llama3",
        base_url=llm_server.openai_base_url,
        environ={},
    )
    llm_server.queue_openai(openai_text("ok"))
    await provider.complete(HELLO)
    await provider.aclose()
    assert "authorization" not in llm_server.requests[0].headers


@pytest.mark.parametrize(
    ("kind", "options", "variable"),
    [
        ("anthropic", {}, "ANTHROPIC_API_KEY"),
        ("openai-compatible", {}, "OPENAI_API_KEY"),
        (
            "openai-compatible",
            {"base_url": "https://api.openai.com/v1"},
            "OPENAI_API_KEY",
        ),
        (
            "openai-compatible",
            {"base_url": "http://127.0.0.1:1/v1", "api_key_env": "VLLM_KEY"},
            "VLLM_KEY",
        ),
    ],
)
def test_factory_missing_key_names_the_variable(kind, options, variable):
    """A needed key whose variable is unset (or blank) is a typed error naming it."""
    with pytest.raises(MissingApiKeyError) as caught:
        make_provider(kind, model="m", environ={variable: "  "}, **options)
    assert caught.value.variable == variable
    assert str(caught.value) == (
        f"Expected the {kind} API key in the environment variable {variable},"
        " found it unset or empty"
    )


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        (
            "gemini",
            {"model": "g"},
            "Expected a provider kind in ['scripted', 'openai-compatible', 'anthropic'], found 'gemini'",
        ),
        (
            "scripted",
            {},
            "Expected a script file for the scripted provider, found none",
        ),
        (
            "anthropic",
            {},
            "Expected a model name for the anthropic provider, found none",
        ),
        (
            "openai-compatible",
            {"model": "m", "base_url": "http://[::1"},
            "Expected an http(s) base URL with a host, found 'http://[::1'",
        ),
        (
            "openai-compatible",
            {"model": "m", "base_url": "ftp://h?token=abcdefgh12345"},
            "Expected an http(s) base URL with a host, found 'ftp://h?token=abcd*[REDACTED]'",
        ),
    ],
)
def test_factory_configuration_errors(kind, options, message):
    """Unknown kinds and missing settings are ProviderConfigError with exact messages."""
    with pytest.raises(ProviderConfigError) as caught:
        make_provider(kind, environ={}, **options)
    assert str(caught.value) == message


def test_script_path_must_exist(tmp_path: Path):
    """A missing script file is the OS error, naming the path."""
    with pytest.raises(FileNotFoundError, match=r"nope\.toml"):
        make_provider("scripted", script=str(tmp_path / "nope.toml"))
