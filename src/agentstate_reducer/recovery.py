"""What a provider's refusal says, and what to send instead: the pure part of recovery.

No I/O, no framework imports. :func:`classify_error` reads an exception, an error body
or its text the way the provider SDKs shape them (an ``openai`` / ``anthropic``
``APIStatusError``, PydanticAI's ``ModelHTTPError``, a ``google-genai`` ``ClientError``,
a ``botocore`` ``ClientError``, an ``httpx`` status error, and the errors that wrap
them); :func:`stated_sizes` reads the token counts its text states; :func:`retry_size`
sizes the request of the retry; :func:`strip_reasoning` drops the reasoning of earlier
turns. The integrations wire them through :class:`~agentstate_reducer.Recovery`.

Recognised as a request too large (:data:`OVERFLOW`):

* OpenAI: code ``context_length_exceeded``; "This model's maximum context length is N
  tokens. However, your messages resulted in M tokens" (or "you requested M tokens (I
  in the messages, C in the completion)"), "Input tokens exceed the configured limit of
  N tokens. Your messages resulted in M tokens", "Your input exceeds the context window
  of this model".
* Anthropic: "prompt is too long: M tokens > N maximum" (``invalid_request_error``);
  HTTP 413 ``request_too_large``.
* Gemini: "The input token count (M) exceeds the maximum number of tokens allowed (N)"
  (400 ``INVALID_ARGUMENT``).
* Bedrock: ``ValidationException`` "Input is too long for requested model", and the
  Anthropic text inside "The model returned the following errors: ...".
* Any HTTP 413.

Recognised as a reasoning signature the provider rejects (:data:`SIGNATURE`):
Anthropic (and Claude on Bedrock) "Invalid `signature` in `thinking` block"; Gemini
"Invalid thought signature" / "Corrupted thought signature"; OpenAI Responses code
``invalid_encrypted_content`` ("The encrypted content ... could not be verified").

Never recognised: a rate limit (HTTP 429, ``rate_limit_exceeded``, ``ThrottlingException``
and Bedrock's "Too many tokens, please wait"), a cap on output tokens (``max_tokens``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .reasoning import CHECKED_REASONING, strip_reasoning

__all__ = (
    "CHECKED_REASONING",
    "DEFAULT_SHRINK",
    "MARGIN",
    "OVERFLOW",
    "SIGNATURE",
    "ProviderError",
    "classify_error",
    "retry_size",
    "stated_sizes",
    "strip_reasoning",
)

#: The request was larger than the model accepts.
OVERFLOW = "overflow"
#: A reasoning block (thinking, thought signature, encrypted reasoning) failed its check.
SIGNATURE = "signature"

#: Share of a refused request the retry keeps when the error states no usable size.
DEFAULT_SHRINK = 0.75
#: Share of a stated limit the retry aims at: the package's count and the provider's
#: differ a little, so the retry stays this far under the limit.
MARGIN = 0.9
#: The retry keeps at least this share of the refused request, whatever the error says.
_FLOOR = 0.05

_N = r"(\d[\d,_]*)"
_OVERFLOW_TEXT = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? the context window"
    r"|prompt is too long|input is too long|input token count.{0,40}exceeds the maximum"
    r"|input tokens exceed the configured limit",
    re.IGNORECASE | re.DOTALL,
)
_SIGNATURE_TEXT = re.compile(
    r"invalid\W+signature\W+in\W+(?:redacted_)?thinking\W+block"
    r"|(?:invalid|corrupted)\W+thought[_ ]?signature"
    r"|invalid_encrypted_content|encrypted content.{0,200}could not be verified",
    re.IGNORECASE | re.DOTALL,
)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "request_too_large"})
_RATE_LIMITS = frozenset(
    {"rate_limit_exceeded", "rate_limit_error", "throttlingexception", "resource_exhausted"}
)
_THROTTLED = re.compile(r"too many tokens,? please wait|per min(?:ute)?\b", re.IGNORECASE)

#: ``(pattern, group of the request's tokens, group of the limit)``, tried in order.
_SIZES = (
    (re.compile(rf"prompt is too long:\s*{_N}\s*tokens\s*>\s*{_N}", re.I), 1, 2),
    (re.compile(rf"input token count\s*\(?{_N}\)?\s*exceeds the maximum number of tokens"
                rf" allowed\s*\(?{_N}\)?", re.I), 1, 2),
    (re.compile(rf"configured limit of {_N} tokens.{{0,80}}?resulted in {_N} tokens",
                re.I | re.S), 2, 1),
)
_LIMIT = re.compile(rf"maximum context length is {_N} tokens", re.I)
_REQUESTED = re.compile(rf"(?:resulted in|requested(?: about)?) {_N} tokens", re.I)
_PROMPT_PART = re.compile(rf"{_N} in (?:the messages|your prompt)", re.I)
_COMPLETION_PART = re.compile(rf"{_N} (?:in|for) the completion", re.I)

#: How deep :func:`classify_error` follows causes and nested bodies.
_DEPTH = 6


@dataclass(frozen=True)
class ProviderError:
    """What a provider's error says, as far as recovery cares."""

    #: :data:`OVERFLOW` or :data:`SIGNATURE`.
    kind: str
    #: Input tokens the provider says the refused request had, when it says.
    tokens: int | None = None
    #: Input tokens the provider accepts (its window less any reserved output), when it says.
    limit: int | None = None
    #: The HTTP status, when the error carries one.
    status: int | None = None


def _number(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def stated_sizes(text: str) -> tuple[int | None, int | None]:
    """``(tokens, limit)``: the request's input tokens and the input tokens allowed, as
    ``text`` states them (either may be ``None``).

    Where OpenAI counts the completion in (``"you requested 4128 tokens (2128 in the
    messages, 2000 in the completion)"``), both are input tokens: the messages' share,
    and the window less the completion.

    Example:
        >>> stated_sizes("prompt is too long: 208656 tokens > 200000 maximum")
        (208656, 200000)
    """
    for pattern, tokens_at, limit_at in _SIZES:
        found = pattern.search(text)
        if found:
            return _number(found.group(tokens_at)), _number(found.group(limit_at))
    limit_found, requested = _LIMIT.search(text), _REQUESTED.search(text)
    limit = _number(limit_found.group(1)) if limit_found else None
    tokens = _number(requested.group(1)) if requested else None
    prompt, completion = _PROMPT_PART.search(text), _COMPLETION_PART.search(text)
    if tokens is not None and prompt and completion:
        reserved = _number(completion.group(1))
        tokens = _number(prompt.group(1))
        limit = None if limit is None else max(1, limit - reserved)
    return tokens, limit


def _texts_and_codes(body: object, depth: int, texts: list[str], codes: set[str]) -> None:
    """Collect the ``message`` texts and ``code`` / ``type`` / ``status`` values of a body."""
    if depth > _DEPTH:
        return
    if isinstance(body, str):
        texts.append(body)
    elif isinstance(body, Mapping):
        for key, value in body.items():
            if key in ("code", "type", "status", "Code", "__type") and isinstance(value, str):
                codes.add(value.lower())
            if isinstance(value, (str, Mapping, list, tuple)):
                _texts_and_codes(value, depth + 1, texts, codes)
    elif isinstance(body, (list, tuple)):
        for value in body[:20]:
            _texts_and_codes(value, depth + 1, texts, codes)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and the errors it wraps (``__cause__``, ``__context__``), each once."""
    seen: set[int] = set()
    todo = [error]
    while todo and len(seen) < _DEPTH:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]


def _status(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
        return value
    return None


def _facts(error: object) -> tuple[list[int], set[str], list[str]]:
    """The HTTP statuses, codes and texts an error (or body, or text) carries."""
    statuses: list[int] = []
    codes: set[str] = set()
    texts: list[str] = []
    if not isinstance(error, BaseException):
        _texts_and_codes(error, 0, texts, codes)
        return statuses, codes, texts
    for exc in _chain(error):
        texts.append(str(exc))
        for name in ("status_code", "status", "code", "http_status"):
            value = getattr(exc, name, None)
            found = _status(value)
            if found is not None:
                statuses.append(found)
            elif isinstance(value, str):
                codes.add(value.lower())
        for name in ("message", "body", "details", "response_json"):
            _texts_and_codes(getattr(exc, name, None), 0, texts, codes)
        response = getattr(exc, "response", None)
        if isinstance(response, Mapping):  # botocore: {"Error": {...}, "ResponseMetadata"}
            _texts_and_codes(response.get("Error"), 0, texts, codes)
            meta = response.get("ResponseMetadata")
            found = _status(meta.get("HTTPStatusCode")) if isinstance(meta, Mapping) else None
        else:  # httpx and the SDKs built on it: response.status_code
            found = _status(getattr(response, "status_code", None))
        if found is not None:
            statuses.append(found)
    return statuses, codes, texts


def classify_error(error: object) -> ProviderError | None:
    """What ``error`` says, or ``None`` when recovery cannot help with it.

    ``error`` is an exception (the errors it wraps are read too), an error body (the
    provider's JSON as a dict) or its text. A rate limit is never recognised, even when
    its text speaks of tokens.

    Example:
        >>> classify_error({"error": {"type": "invalid_request_error",
        ...     "message": "prompt is too long: 208656 tokens > 200000 maximum"}})
        ProviderError(kind='overflow', tokens=208656, limit=200000, status=None)
    """
    statuses, codes, texts = _facts(error)
    text = "\n".join(texts)
    status = statuses[0] if statuses else None
    if 429 in statuses or codes & _RATE_LIMITS or _THROTTLED.search(text):
        return None
    if _SIGNATURE_TEXT.search(text) or "invalid_encrypted_content" in codes:
        return ProviderError(SIGNATURE, status=status)
    if 413 in statuses or codes & _OVERFLOW_CODES or _OVERFLOW_TEXT.search(text):
        tokens, limit = stated_sizes(text)
        return ProviderError(OVERFLOW, tokens, limit, status)
    return None


def retry_size(
    sent: int, *, tokens: int | None = None, limit: int | None = None, factor: float = 1.0
) -> int:
    """Estimated tokens the retry of a refused request of ``sent`` estimated tokens may have.

    With both ``tokens`` and ``limit`` stated, the request shrinks by ``limit / tokens``
    (times :data:`MARGIN`); with the limit alone, to :data:`MARGIN` of it (``sent`` times
    ``factor`` is the request in the provider's tokens), and at least by
    :data:`DEFAULT_SHRINK`; with neither, by :data:`DEFAULT_SHRINK`. Always smaller than
    ``sent`` (for ``sent > 1``), never below 1.

    Example:
        >>> retry_size(1000, tokens=2000, limit=1000)
        450
    """
    if tokens and limit and tokens > 0 and limit > 0:
        ratio = MARGIN * limit / tokens
    elif limit and limit > 0:
        ratio = min(DEFAULT_SHRINK, MARGIN * limit / max(1.0, sent * factor))
    else:
        ratio = DEFAULT_SHRINK
    ratio = min(max(ratio, _FLOOR), MARGIN)
    return max(1, min(sent - 1, int(sent * ratio)))
