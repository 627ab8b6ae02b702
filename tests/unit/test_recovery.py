"""recovery.py (what a provider's refusal says, the size of the retry, historical reasoning
stripped) and the Recovery driver, with the SDKs' real exception types where installed."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_reasoning import deepseek_histories, thinking_histories

from agentstate_reducer import (
    ConfigError,
    MessageReducer,
    Recovery,
    ReducerConfig,
    classify_error,
    validate_history,
)
from agentstate_reducer.plan import current_turn
from agentstate_reducer.read import read_messages, reasoning_parts, without_reasoning
from agentstate_reducer.recovery import (
    CHECKED_REASONING,
    DEFAULT_SHRINK,
    MARGIN,
    OVERFLOW,
    SIGNATURE,
    ProviderError,
    retry_size,
    stated_sizes,
    strip_reasoning,
)
from agentstate_reducer.tokens import Calibration

_REQUEST = httpx.Request("POST", "/v1/chat/completions")


def openai_error(status: int, body: dict[str, Any] | None) -> Exception:
    """The error the ``openai`` SDK raises for a refused request (no network)."""
    import openai

    response = httpx.Response(status, request=_REQUEST)
    message = f"Error code: {status} - {body!r}"
    if status == 400:
        return openai.BadRequestError(message, response=response, body=body)
    return openai.APIStatusError(message, response=response, body=body)


class BotocoreClientError(Exception):
    """What ``botocore.exceptions.ClientError`` carries (botocore is not installed here)."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        self.response = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        super().__init__(f"An error occurred ({code}) when calling the Converse operation: "
                         f"{message}")


class GenaiClientError(Exception):
    """What ``google.genai.errors.ClientError`` carries (google-genai is not installed)."""

    def __init__(self, code: int, status: str, message: str) -> None:
        self.code, self.status, self.message = code, status, message
        self.details = {"error": {"code": code, "message": message, "status": status}}
        super().__init__(f"{code} {status}. {self.details}")


OPENAI_OVERFLOW = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted "
    "in 130000 tokens. Please reduce the length of the messages."
)
ANTHROPIC_OVERFLOW = "prompt is too long: 208656 tokens > 200000 maximum"
GEMINI_OVERFLOW = (
    "The input token count (1054016) exceeds the maximum number of tokens allowed (1048576)."
)


def recognised() -> list[tuple[str, object, ProviderError]]:
    from pydantic_ai.exceptions import ModelHTTPError

    anthropic_body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": ANTHROPIC_OVERFLOW},
    }
    signature = "messages.1.content.0: Invalid `signature` in `thinking` block"
    wrapped = RuntimeError("model call failed")
    wrapped.__cause__ = openai_error(400, {"message": OPENAI_OVERFLOW, "code": None})
    return [
        ("openai chat", openai_error(400, {
            "message": OPENAI_OVERFLOW, "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}),
         ProviderError(OVERFLOW, 130000, 128000, 400)),
        ("openai with completion", openai_error(400, {
            "message": "This model's maximum context length is 4097 tokens. However, you "
            "requested 4128 tokens (2128 in the messages, 2000 in the completion).",
            "type": "invalid_request_error", "code": None}),
         ProviderError(OVERFLOW, 2128, 2097, 400)),
        ("openai configured limit", openai_error(400, {
            "message": "Input tokens exceed the configured limit of 272000 tokens. Your "
            "messages resulted in 533603 tokens. Please reduce the length of the messages.",
            "code": "context_length_exceeded"}),
         ProviderError(OVERFLOW, 533603, 272000, 400)),
        ("openai responses", openai_error(400, {
            "message": "Your input exceeds the context window of this model. Please adjust "
            "your input and try again.", "code": "context_length_exceeded", "param": "input"}),
         ProviderError(OVERFLOW, None, None, 400)),
        ("by code alone", openai_error(400, {"message": "", "code": "context_length_exceeded"}),
         ProviderError(OVERFLOW, None, None, 400)),
        ("wrapped", wrapped, ProviderError(OVERFLOW, 130000, 128000, 400)),
        ("anthropic via pydantic-ai", ModelHTTPError(400, "claude-sonnet-4-5", anthropic_body),
         ProviderError(OVERFLOW, 208656, 200000, 400)),
        ("anthropic body", anthropic_body, ProviderError(OVERFLOW, 208656, 200000)),
        ("anthropic 413", openai_error(413, {"type": "error", "error": {
            "type": "request_too_large", "message": "Request exceeds the maximum size"}}),
         ProviderError(OVERFLOW, None, None, 413)),
        ("bare 413", httpx.HTTPStatusError(
            "413 Payload Too Large", request=_REQUEST,
            response=httpx.Response(413, request=_REQUEST)),
         ProviderError(OVERFLOW, None, None, 413)),
        ("gemini", GenaiClientError(400, "INVALID_ARGUMENT", GEMINI_OVERFLOW),
         ProviderError(OVERFLOW, 1054016, 1048576, 400)),
        ("bedrock", BotocoreClientError("ValidationException",
                                        "Input is too long for requested model."),
         ProviderError(OVERFLOW, None, None, 400)),
        ("bedrock claude", BotocoreClientError(
            "ValidationException", "The model returned the following errors: "
            + ANTHROPIC_OVERFLOW), ProviderError(OVERFLOW, 208656, 200000, 400)),
        ("anthropic signature", ModelHTTPError(400, "claude", {"type": "error", "error": {
            "type": "invalid_request_error", "message": signature}}),
         ProviderError(SIGNATURE, status=400)),
        ("bedrock signature", BotocoreClientError(
            "ValidationException", "The model returned the following errors: "
            "messages.39.content.0: Invalid signature in thinking block"),
         ProviderError(SIGNATURE, status=400)),
        ("gemini signature", GenaiClientError(400, "INVALID_ARGUMENT",
                                              "Corrupted thought signature."),
         ProviderError(SIGNATURE, status=400)),
        ("responses encrypted", openai_error(400, {
            "message": "The encrypted content gAAA...Rg== could not be verified.",
            "type": "invalid_request_error", "code": "invalid_encrypted_content"}),
         ProviderError(SIGNATURE, status=400)),
    ]


@pytest.mark.parametrize("case", range(len(recognised())))
def test_documented_refusals_are_recognised(case: int) -> None:
    name, error, expected = recognised()[case]
    assert classify_error(error) == expected, name


@pytest.mark.parametrize(
    "error",
    [
        openai_error(429, {"message": "Rate limit reached for gpt-4o in organization org-x on "
                           "tokens per min (TPM): Limit 30000, Requested 52000.",
                           "code": "rate_limit_exceeded"}),
        BotocoreClientError("ThrottlingException",
                            "Too many tokens, please wait before trying again.", 429),
        GenaiClientError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted."),
        {"type": "error", "error": {"type": "invalid_request_error", "message":
         "max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens"}},
        openai_error(400, {"message": "Invalid schema for function 'lookup'", "code": None}),
        openai_error(500, {"message": "The server had an error", "code": None}),
        ValueError("something else"),
        "",
    ],
    ids=["openai-tpm", "bedrock-throttle", "gemini-429", "max-tokens", "schema", "500",
         "other", "empty"],
)
def test_other_errors_are_not_recognised(error: object) -> None:
    assert classify_error(error) is None


_TEMPLATES = [
    ("This model's maximum context length is {limit} tokens. However, your messages resulted "
     "in {tokens} tokens."),
    "prompt is too long: {tokens} tokens > {limit} maximum",
    "The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
    ("Input tokens exceed the configured limit of {limit} tokens. Your messages resulted in "
     "{tokens} tokens."),
]


@given(
    template=st.sampled_from(_TEMPLATES),
    limit=st.integers(1, 10**7),
    extra=st.integers(1, 10**6),
    commas=st.booleans(),
    before=st.text(alphabet="abc ;:{}\"'\n", max_size=30),
    after=st.text(alphabet="abc ;:{}\"'\n", max_size=30),
)
def test_stated_sizes_read_back_what_the_text_states(
    template: str, limit: int, extra: int, commas: bool, before: str, after: str
) -> None:
    tokens = limit + extra
    show = (lambda n: f"{n:,}") if commas else str
    text = before + template.format(tokens=show(tokens), limit=show(limit)) + after
    assert stated_sizes(text) == (tokens, limit)
    found = classify_error(text)
    assert found is not None and (found.kind, found.tokens, found.limit) == (
        OVERFLOW, tokens, limit)


@given(st.text(alphabet="xyzXYZ0123456789 .,:-_\n", max_size=200))
def test_text_without_a_known_refusal_is_not_recognised(text: str) -> None:
    assert classify_error(text) is None


@given(
    sent=st.integers(2, 10**7),
    limit=st.one_of(st.none(), st.integers(1, 10**7)),
    over=st.one_of(st.none(), st.integers(1, 10**7)),
    factor=st.floats(0.5, 2.0),
)
def test_retry_size_is_smaller_and_fits_a_stated_limit(
    sent: int, limit: int | None, over: int | None, factor: float
) -> None:
    tokens = None if limit is None or over is None else limit + over
    size = retry_size(sent, tokens=tokens, limit=limit, factor=factor)
    assert 1 <= size < sent
    assert size <= sent * MARGIN
    if tokens is not None and limit is not None and MARGIN * limit / tokens >= 0.05:
        # Scaled as the provider counts the refused request, the retry fits its limit.
        assert size * tokens / sent <= MARGIN * limit + tokens / sent
    if limit is None:
        assert size == max(1, min(sent - 1, int(sent * DEFAULT_SHRINK)))


def test_retry_size_examples() -> None:
    assert retry_size(1000) == 750
    assert retry_size(1000, tokens=2000, limit=1000) == 450
    # The limit alone: 90% of it, as the provider counts the refused request.
    assert retry_size(1000, limit=500, factor=1.0) == 450
    assert retry_size(1000, limit=990, factor=1.0) == 750  # at least the default shrink
    assert retry_size(2) == 1


# -- historical reasoning -------------------------------------------------------------------


def checked(message: Any, index: int) -> list[Any]:
    return [p for p in reasoning_parts(message, index) if p.kind in CHECKED_REASONING]


def _reasoning_before(messages: list[Any], begin: int) -> int:
    return sum(len(checked(m, i)) for i, m in enumerate(messages[:begin]))


@settings(max_examples=60, deadline=None)
@given(st.one_of(thinking_histories(), deepseek_histories()))
def test_strip_reasoning_drops_earlier_turns_whole_and_keeps_the_current_turn(
    history: list[Any],
) -> None:
    before = copy.deepcopy(history)
    begin = current_turn(read_messages(history)).begin
    stripped, changed = strip_reasoning(history)
    tail = len(history) - begin
    assert history == before  # never mutated
    assert all(a is b for a, b in zip(stripped[len(stripped) - tail:], history[begin:],
                                       strict=True))
    assert _reasoning_before(stripped, len(stripped) - tail) == 0
    assert changed == sum(1 for i, m in enumerate(history[:begin]) if checked(m, i))
    # What is left of an earlier message is its other parts, untouched and in order.
    kept = [m for m in stripped[: len(stripped) - tail]]
    originals = [
        m for i, m in enumerate(history[:begin])
        if without_reasoning(m, i, kinds=CHECKED_REASONING) is not None
    ]
    assert len(kept) == len(originals)
    for copy_, original in zip(kept, originals, strict=True):
        content = getattr(copy_, "content", None) if not isinstance(copy_, dict) else \
            copy_.get("content")
        source = getattr(original, "content", None) if not isinstance(original, dict) else \
            original.get("content")
        if isinstance(source, list):
            assert content == [b for b in source if not (isinstance(b, dict) and b.get("type")
                               in ("thinking", "redacted_thinking", "reasoning"))]
    for provider in ("anthropic", "openai"):
        if not validate_history(history, provider=provider):
            assert validate_history(stripped, provider=provider) == []
    assert strip_reasoning(stripped) == (stripped, 0)


def test_strip_reasoning_in_every_shape() -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ThinkingPart,
        UserPromptPart,
    )

    think = {"type": "thinking", "thinking": "plan", "signature": "sig-1"}
    shapes: dict[str, tuple[list[Any], int]] = {
        "anthropic": ([
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": [think, {"type": "text", "text": "a1"}]},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": [dict(think, signature="sig-2")]},
        ], 1),
        "responses": ([
            {"role": "user", "content": "q1"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            {"type": "message", "role": "assistant", "id": "msg_1",
             "content": [{"type": "output_text", "text": "a1"}]},
            {"role": "user", "content": "q2"},
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "y"},
        ], 1),
        "gemini": ([
            {"role": "user", "parts": [{"text": "q1"}]},
            {"role": "model", "parts": [{"text": "plan", "thought": True}, {"text": "a1"}]},
            {"role": "user", "parts": [{"text": "q2"}]},
            {"role": "model", "parts": [{"text": "plan 2", "thought": True}]},
        ], 1),
        "bedrock": ([
            {"role": "user", "content": [{"text": "q1"}]},
            {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "plan", "signature": "s"}}},
                {"text": "a1"}]},
            {"role": "user", "content": [{"text": "q2"}]},
        ], 1),
        "pydantic-ai": ([
            ModelRequest(parts=[UserPromptPart("q1")]),
            ModelResponse(parts=[ThinkingPart("plan", signature="s1"), TextPart("a1")]),
            ModelResponse(parts=[ThinkingPart("alone", signature="s2")]),
            ModelRequest(parts=[UserPromptPart("q2")]),
            ModelResponse(parts=[ThinkingPart("now", signature="s3"), TextPart("a2")]),
        ], 2),
    }
    for name, (history, changed) in shapes.items():
        before = copy.deepcopy(history)
        stripped, count = strip_reasoning(history)
        begin = current_turn(read_messages(history)).begin
        assert count == changed, name
        assert history == before, name
        assert stripped[-(len(history) - begin):] == history[begin:], name
        assert all(not reasoning_parts(m, i) for i, m in enumerate(stripped[:-(len(history)
                   - begin)])), name
    # The Responses reasoning item of an earlier turn goes whole; Gemini and Converse keep
    # their text parts; PydanticAI drops a response of thinking alone.
    assert len(strip_reasoning(shapes["responses"][0])[0]) == 4
    assert strip_reasoning(shapes["gemini"][0])[0][1] == {"role": "model",
                                                          "parts": [{"text": "a1"}]}
    assert strip_reasoning(shapes["bedrock"][0])[0][1]["content"] == [{"text": "a1"}]
    assert len(strip_reasoning(shapes["pydantic-ai"][0])[0]) == 4


def test_without_reasoning_keeps_a_message_without_reasoning_as_it_is() -> None:
    message = {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
    assert without_reasoning(message) is message


# -- the ceiling a refusal leaves -----------------------------------------------------------


def test_a_ceiling_lowers_the_budget_of_its_namespace_only() -> None:
    reducer = MessageReducer(config=ReducerConfig(
        max_tokens=1000, target_tokens=800, token_counter=lambda m: 100))
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": str(i)}
               for i in range(9)]
    assert reducer.reduce(history, namespace="a").pruned == []
    assert reducer.calibration("a").cap(500) == 500
    assert reducer.calibration("a").cap(700) == 500  # never raised
    # max 1000 -> 500 (minus the reply priming), target 800 -> 400: 3 messages kept.
    kept = reducer.reduce(history, namespace="a").surviving
    assert len(kept) == 4  # the first message is preserved
    assert reducer.reduce(history, namespace="b").pruned == []
    with pytest.raises(ConfigError, match="tokens must be a positive int"):
        Calibration().cap(0)


def test_request_tokens_counts_what_calibrate_compares() -> None:
    reducer = MessageReducer(config=ReducerConfig(
        max_tokens=1000, token_counter=lambda m: 10, system_prompt="be brief"))
    history = [{"role": "user", "content": "hi"}] * 3
    estimated = reducer.request_tokens(history)
    assert estimated > 30
    assert reducer.calibrate(history, 2 * estimated) == 2.0


# -- the driver -----------------------------------------------------------------------------


class Provider:
    """A model that refuses requests counting more than ``limit`` tokens, as a provider
    does, with the error ``refuse(tokens)`` builds."""

    def __init__(self, reducer: MessageReducer, limit: int, refuse: Any) -> None:
        self.reducer, self.limit, self.refuse = reducer, limit, refuse
        self.sizes: list[int] = []

    def __call__(self, messages: list[Any]) -> str:
        size = self.reducer.request_tokens(messages)
        self.sizes.append(size)
        if size > self.limit:
            raise self.refuse(size)
        return f"ok {len(messages)}"


def _history(n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
            for i in range(n)]


def _anthropic_refusal(limit: int) -> Any:
    from pydantic_ai.exceptions import ModelHTTPError

    def refuse(size: int) -> Exception:
        return ModelHTTPError(400, "claude", {"type": "error", "error": {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {size} tokens > {limit} maximum"}})

    return refuse


def test_call_retries_once_smaller_and_the_ceiling_stays() -> None:
    reducer = MessageReducer(config=ReducerConfig(
        max_tokens=2000, target_tokens=1500, token_counter=lambda m: 100))
    provider = Provider(reducer, 1000, _anthropic_refusal(1000))
    recovery = Recovery(reducer)
    history = _history(15)
    sent = reducer.reduce(history, namespace="t").surviving
    assert recovery.call(sent, provider, namespace="t").startswith("ok")
    assert len(provider.sizes) == 2 and provider.sizes[1] <= 1000 < provider.sizes[0]
    assert recovery.retries == 1 and recovery.failed_retries == 0
    # The thread's next reduce keeps under the ceiling: no refusal, no retry.
    again = reducer.reduce([*history, *_history(4)], namespace="t").surviving
    recovery.call(again, provider, namespace="t")
    assert len(provider.sizes) == 3 and provider.sizes[2] <= 1000
    assert recovery.retries == 1


def test_a_second_refusal_raises_the_providers_own_error() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=2000, token_counter=lambda m: 100))
    refusals: list[Exception] = []

    def always(messages: list[Any]) -> str:
        refusals.append(openai_error(400, {"message": OPENAI_OVERFLOW,
                                           "code": "context_length_exceeded"}))
        raise refusals[-1]

    with pytest.raises(Exception) as raised:
        Recovery(reducer).call(_history(15), always)
    assert len(refusals) == 2
    assert raised.value is refusals[1]
    assert raised.value.__context__ is None and raised.value.__cause__ is None


def test_unrecognised_errors_and_useless_retries_raise_at_once() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=2000, token_counter=lambda m: 100))
    calls: list[int] = []

    def broken(messages: list[Any]) -> str:
        calls.append(len(messages))
        raise ValueError("not a refusal")

    with pytest.raises(ValueError, match="not a refusal"):
        Recovery(reducer).call(_history(5), broken)
    assert calls == [5]

    def too_large(messages: list[Any]) -> str:
        calls.append(len(messages))
        raise openai_error(413, None)

    # A single message cannot shrink: retrying would send the same request again.
    with pytest.raises(Exception, match="413"):
        Recovery(reducer).call([{"role": "user", "content": "x"}], too_large)
    assert calls == [5, 1]


def test_a_send_raising_stopiteration_reaches_the_caller_as_raised() -> None:
    # A Mock whose side_effect list ran out raises StopIteration: the flow on the sync
    # driver must not turn it into "RuntimeError: generator raised StopIteration".
    reducer = MessageReducer(config=ReducerConfig(max_messages=20))
    exhausted = StopIteration("no more replies")

    def send(messages: list[Any]) -> str:
        raise exhausted

    with pytest.raises(StopIteration) as raised:
        Recovery(reducer).call(_history(3), send)
    assert raised.value is exhausted


def test_count_mode_retries_with_fewer_messages_and_remembers() -> None:
    reducer = MessageReducer(config=ReducerConfig(min_messages=10, max_messages=20))
    seen: list[int] = []

    def provider(messages: list[Any]) -> str:
        seen.append(len(messages))
        if len(messages) > 9:
            raise BotocoreClientError("ValidationException",
                                      "Input is too long for requested model.")
        return "ok"

    recovery = Recovery(reducer)
    history = _history(12)
    assert recovery.call(history, provider, namespace="t") == "ok"
    assert seen == [12, 9]  # 3/4 of the messages
    recovery.call(history, provider, namespace="t")
    assert seen == [12, 9, 9]  # the cap is applied before sending


def _thinking_thread(turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for t in range(turns):
        history.append({"role": "user", "content": f"q{t}"})
        history.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"plan {t}", "signature": f"sig-{t}"},
            {"type": "text", "text": f"a{t}"}]})
    return history


def test_a_signature_error_strips_earlier_reasoning_once_and_for_the_thread() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10**6))
    requests: list[list[Any]] = []

    def provider(messages: list[Any]) -> str:
        requests.append(messages)
        old = [b for m in messages[:-1] for b in (m["content"] if isinstance(m["content"], list)
                                                  else []) if b.get("type") == "thinking"]
        if any(b["signature"] == "sig-0" for b in old):  # signed by another account
            raise BotocoreClientError(
                "ValidationException", "The model returned the following errors: "
                "messages.1.content.0: Invalid signature in thinking block")
        return "ok"

    history = [*_thinking_thread(3), {"role": "user", "content": "q3"}]
    recovery = Recovery(reducer)
    assert recovery.call(history, provider, namespace="t") == "ok"
    assert len(requests) == 2
    retried = requests[1]
    assert all(not reasoning_parts(m) for m in retried[:-1])
    assert retried[-1] is history[-1]
    # Later requests of the thread go without earlier reasoning at once.
    recovery.call([*history, {"role": "assistant", "content": "a3"},
                   {"role": "user", "content": "q4"}], provider, namespace="t")
    assert len(requests) == 3


def test_acall_is_the_async_twin() -> None:
    reducer = MessageReducer(config=ReducerConfig(
        max_tokens=2000, target_tokens=1500, token_counter=lambda m: 100))
    provider = Provider(reducer, 1000, lambda size: GenaiClientError(
        400, "INVALID_ARGUMENT", f"The input token count ({size}) exceeds the maximum number of "
        "tokens allowed (1000)."))

    async def send(messages: list[Any]) -> str:
        return provider(messages)

    recovery = Recovery(reducer)
    result = asyncio.run(recovery.acall(_history(15), send, namespace="t"))
    assert result.startswith("ok") and recovery.retries == 1
    assert provider.sizes[1] <= 1000 < provider.sizes[0]
