"""The model registry (model names to counters and context windows) and the resolution of
every accepted ``token_counter`` value to a per-message counter.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from functools import cache
from typing import Any, NamedTuple

from ..errors import ConfigError
from .count import TokenCounter, _TextCounter, approximate_token_count
from .encodings import _ENCODINGS, DEFAULT_ENCODING, exact_token_counter
from .heuristic import approximate_text_tokens

__all__ = (
    "ESTIMATORS",
    "MODELS",
    "Estimator",
    "ModelFamily",
    "check_token_counter",
    "context_window",
    "model_family",
    "model_name",
    "resolve_token_counter",
    "resolve_budget",
)


logger = logging.getLogger("agentstate_reducer")


class ModelFamily(NamedTuple):
    """One row of :data:`MODELS`: which model names it matches and how they are counted."""

    #: The family, as errors list them.
    family: str
    #: A regular expression matched at the start of the normalised model name, up to a
    #: character that is neither a word character nor a dot (``gpt-4`` is not ``gpt-4o``).
    pattern: str
    #: An exact encoding (``"o200k_base"``, ``"cl100k_base"``) or an estimator of
    #: :data:`ESTIMATORS`.
    counter: str
    #: Input tokens a budget of ``("fraction", f)`` is a share of.
    context_window: int
    #: Input tokens one request may hold, when more than :attr:`context_window` (which
    #: then stops at a price step): ``context_window="full"`` asks for it.
    full_window: int | None = None
    #: The documents the window and the tokenizer come from (docs/tokens.md).
    source: str = ""


_OPENAI_LONG = "OpenAI model pages: GPT-5.4, GPT-5.5 (1,050,000 context, 128,000 output)"
_OPENAI_GPT5 = (
    "OpenAI model pages: GPT-5, GPT-5 mini, GPT-5.4 nano (400,000 context, 128,000 output)"
)
_CLAUDE_NEW = "Claude model overviews (Opus 4.7 to 5.5, Sonnet 5, Haiku 5.5); Token counting"
_CLAUDE_46 = "Claude model overviews: Claude Opus 4.6, Claude Sonnet 4.6"
_CLAUDE = "Claude model overviews: Opus 4.5, Sonnet 4.5, Haiku 4.5 (200K)"

#: Model names to counters and context windows, first match wins. Names are matched
#: lower-cased, without a provider prefix (``openai:``, ``anthropic/``, ``models/``,
#: ``ft:``, a Bedrock ``anthropic.`` or ``us.anthropic.``) or a Bedrock ``:0`` suffix.
MODELS: tuple[ModelFamily, ...] = (
    ModelFamily(
        "gpt-5", r"gpt-5(?:\.\d+)?-(?:mini|nano)", "o200k_base", 272_000, None, _OPENAI_GPT5
    ),
    # 272,000 is where the input price doubles (and the output price is 1.5x) for the
    # whole request: the budget stops there unless the full window is asked for.
    ModelFamily(
        "gpt-5.4+", r"gpt-5\.(?:[4-9]|\d{2,})", "o200k_base", 272_000, 922_000, _OPENAI_LONG
    ),
    ModelFamily("gpt-5", r"gpt-5(?:\.\d+)?", "o200k_base", 272_000, None, _OPENAI_GPT5),
    ModelFamily(
        "gpt-4.1", r"gpt-4\.1", "o200k_base", 1_047_576, None, "OpenAI model page: GPT-4.1"
    ),
    ModelFamily("gpt-4.5", r"gpt-4\.5", "o200k_base", 128_000, None, "OpenAI model page: GPT-4.5"),
    ModelFamily(
        "gpt-4o", r"(?:chatgpt-)?gpt-4o", "o200k_base", 128_000, None, "OpenAI model page: GPT-4o"
    ),
    ModelFamily(
        "o-series",
        r"o1-(?:mini|preview)",
        "o200k_base",
        128_000,
        None,
        "OpenAI model page: o1-mini",
    ),
    ModelFamily(
        "o-series", r"o[134]", "o200k_base", 200_000, None, "OpenAI model pages: o1, o3, o4-mini"
    ),
    ModelFamily(
        "gpt-oss", r"gpt-oss", "o200k_base", 131_072, None, "gpt-oss model card (o200k_harmony)"
    ),
    ModelFamily(
        "gpt-4",
        r"gpt-4-(?:turbo|\d{4}-preview|vision-preview)",
        "cl100k_base",
        128_000,
        None,
        "OpenAI model page: GPT-4 Turbo",
    ),
    ModelFamily("gpt-4", r"gpt-4-32k", "cl100k_base", 32_768, None, "OpenAI model page: GPT-4"),
    ModelFamily("gpt-4", r"gpt-4", "cl100k_base", 8_192, None, "OpenAI model page: GPT-4"),
    ModelFamily(
        "gpt-3.5",
        r"gpt-3\.5(?:-turbo)?",
        "cl100k_base",
        16_385,
        None,
        "OpenAI model page: GPT-3.5 Turbo",
    ),
    ModelFamily(
        "claude-4.7+",
        r"claude-(?:opus-4[-.][7-9]|(?:opus|sonnet|haiku|fable)-[5-9](?:[-.]\d)?|fable)",
        "claude-4.7",
        1_000_000,
        None,
        _CLAUDE_NEW,
    ),
    # The newer tokenizer (Token counting), a window no page gives: the Claude default.
    ModelFamily("claude-4.7+", r"claude-mythos", "claude-4.7", 200_000, None, "Token counting"),
    ModelFamily(
        "claude-4.6", r"claude-(?:opus|sonnet)-4[-.]6", "claude", 1_000_000, None, _CLAUDE_46
    ),
    ModelFamily("claude", r"claude", "claude", 200_000, None, _CLAUDE),
    ModelFamily(
        "gemini", r"gemini-1\.5-pro", "gemini", 2_097_152, None, "Gemini API models: Gemini 1.5 Pro"
    ),
    ModelFamily(
        "gemini-3",
        r"gemini-3(?:\.\d+)?",
        "gemini",
        1_048_576,
        None,
        "Gemini model pages: Gemini 3 Flash, Gemini 3.7 Flash (input token limit 1,048,576)",
    ),
    ModelFamily(
        "gemini",
        r"gemini",
        "gemini",
        1_048_576,
        None,
        "Gemini API models: Gemini 2.0 Flash, 2.5 Pro",
    ),
    ModelFamily(
        "deepseek", r"deepseek", "deepseek", 128_000, None, "DeepSeek API: Models & Pricing (128K)"
    ),
    ModelFamily(
        "qwen",
        r"qwen3-(?:coder|[\w.-]*2507)",
        "qwen",
        262_144,
        None,
        "Qwen3-30B-A3B-Instruct-2507, Qwen3-Coder-30B-A3B-Instruct model cards (262,144 natively)",
    ),
    ModelFamily(
        "qwen",
        r"qwen\d*(?:\.\d+)?",
        "qwen",
        131_072,
        None,
        "Qwen2.5 and Qwen3 model cards (131,072 with YaRN; Qwen3 32,768 natively)",
    ),
    ModelFamily(
        "llama", r"llama-?3\.[1-3]", "llama", 131_072, None, "Llama 3.1, 3.3 model cards (128K)"
    ),
    ModelFamily(
        "llama", r"llama-?4", "llama", 1_000_000, None, "Llama 4 model card (Maverick: 1M)"
    ),
    ModelFamily("llama", r"llama-?\d*(?:\.\d+)?", "llama", 8_192, None, "Llama 3 model card (8K)"),
)
_MODEL_PATTERNS = tuple((re.compile(row.pattern + r"(?![\w.])"), row) for row in MODELS)
_PROVIDER_PREFIX = re.compile(
    r"(?:ft:)?(?:[a-z_-]+:(?=[a-z]))?(?:[a-z]{2}\.)?(?:anthropic\.|google\.)?"
)


class Estimator(NamedTuple):
    """A provider without an offline tokenizer: the heuristic, scaled."""

    #: Tokens of the provider per token the heuristic estimates for ``o200k_base``.
    factor: float
    #: What is known of its error (docs/tokens.md has more).
    error: str


#: The estimators :data:`MODELS` names. Claude and Gemini publish no tokenizer that runs
#: offline, so their factors are priors; Qwen's and DeepSeek's were measured against their
#: tokenizers (``bench/measure_open_tokenizers.py``). Feed reported usage to
#: :meth:`~agentstate_reducer.MessageReducer.calibrate` (or leave ``usage_metadata`` on
#: the ai messages) to track what is billed.
ESTIMATORS = {
    "claude": Estimator(
        1.3,
        "not measured offline; Claude's tokenizers spend more than o200k_base on English: "
        "calibrate from reported usage",
    ),
    "claude-4.7": Estimator(
        1.7,
        "the claude prior times the newer tokenizer's documented ratio (about 1.3x the "
        "earlier models'; measured through the token-count endpoint, 1.45x on English "
        "prose, 1.13-1.33x on code, 1.00x on Chinese, Japanese, Korean, Arabic, Hindi and "
        "Russian): calibrate from reported usage",
    ),
    "gemini": Estimator(
        1.1,
        "not measured offline; Gemini's tokenizer is close to o200k_base on English and "
        "differs on code and other scripts: calibrate from reported usage",
    ),
    "qwen": Estimator(
        1.1,
        "measured against Qwen2.5's and Qwen3.6's tokenizers on the token corpus: on "
        "English, code, JSON and European text within 22% per class, numbers (a token a "
        "digit) up to 40% low, the whole corpus within 8%; other scripts up to 78% off",
    ),
    "deepseek": Estimator(
        1.0,
        "measured against DeepSeek V4's tokenizer on the token corpus: on English, code, "
        "JSON and European text within 21% per class, the whole corpus within 7%; other "
        "scripts up to 51% off",
    ),
    "llama": Estimator(
        1.0,
        "not measured offline (no tokenizer ships in a package); Llama 3's vocabulary "
        "extends cl100k_base's, close to o200k_base on English and above it on other "
        "scripts: calibrate from reported usage",
    ),
}


def _families() -> str:
    return ", ".join(dict.fromkeys(row.family for row in MODELS))


def model_family(model: str) -> ModelFamily:
    """The :data:`MODELS` row of ``model`` (``"gpt-4o"``, ``"openai:gpt-4.1-mini"``, ...).

    Raises:
        ConfigError: no row matches; the message lists the known families.
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = name[_PROVIDER_PREFIX.match(name).end() :]  # type: ignore[union-attr]
    for pattern, row in _MODEL_PATTERNS:
        if pattern.match(name):
            return row
    raise ConfigError(
        f"model {model!r} is not in the model registry; known families: {_families()} "
        "(or pass an encoding name, 'approximate' or a callable counter)"
    )


class _EstimateCounter(_TextCounter):
    """The heuristic scaled for a provider of :data:`ESTIMATORS`."""

    def __init__(self, name: str, factor: float) -> None:
        self.name = name
        self._factor = factor

    def text_tokens(self, text: str) -> int:
        if not text:
            return 0
        return int(approximate_text_tokens(text) * self._factor + 0.5) or 1

    def __repr__(self) -> str:
        return f"estimate_token_counter({self.name!r}, factor={self._factor})"


@cache
def _estimator(name: str) -> _EstimateCounter:
    return _EstimateCounter(name, ESTIMATORS[name].factor)


def _named_counter(name: str, *, load: bool) -> TokenCounter | None:
    """The counter ``name`` stands for (``None`` when ``load`` is false), or ConfigError."""
    if name == "approximate":
        return approximate_token_count
    if name == "tiktoken":
        name = DEFAULT_ENCODING
    target = name if name in _ENCODINGS else model_family(name).counter
    if not load:
        return None
    if target in _ENCODINGS:
        return exact_token_counter(target)
    return _estimator(target)


def check_token_counter(token_counter: Any) -> None:
    """Raise ConfigError unless ``token_counter`` is a value :func:`resolve_token_counter` takes.

    Loads nothing: a name of the registry is checked, not built.
    """
    if isinstance(token_counter, str):
        try:
            _named_counter(token_counter, load=False)
        except ConfigError as exc:
            raise ConfigError(f"token_counter: {exc}") from None
        return
    if not (
        token_counter is None
        or callable(token_counter)
        or callable(getattr(token_counter, "get_num_tokens_from_messages", None))
    ):
        raise ConfigError(
            "token_counter must be a callable, a chat model with get_num_tokens_from_messages, "
            "'approximate', 'tiktoken', an encoding name or a model name, "
            f"got {token_counter!r}"
        )


def context_window(model: Any, *, full: bool = False) -> int:
    """Input tokens one request to ``model`` may hold.

    ``model`` is a model name of :data:`MODELS`, or a LangChain chat model: its
    ``profile["max_input_tokens"]`` when it has one, else its ``model_name`` /
    ``model`` looked up in :data:`MODELS`. A row whose window stops at a price step
    (GPT-5.4 and later: 272,000) gives its whole window with ``full=True``.

    Raises:
        ConfigError: the window cannot be told; the message says why.
    """
    if isinstance(model, str):
        return _row_window(model_family(model), full)
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping):
        window = profile.get("max_input_tokens")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            return window
    name = model_name(model)
    if name is not None:
        return _row_window(model_family(name), full)
    raise ConfigError(
        f"model {model!r:.80} has no profile with max_input_tokens and no model name to look "
        "up; pass a model name, context_window= or an int budget"
    )


def _row_window(row: ModelFamily, full: bool) -> int:
    return row.full_window if full and row.full_window is not None else row.context_window


def model_name(model: Any) -> str | None:
    """The name of ``model``: itself when a string, else its ``model_name``, ``model`` or
    ``model_id`` attribute (a LangChain chat model), else ``None``."""
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return None


_fallback_logged = threading.Event()


def _log_fallback(exc: Exception) -> None:
    if not _fallback_logged.is_set():
        _fallback_logged.set()
        logger.warning("agentstate-reducer: counting tokens with the character heuristic (%s)", exc)


def _to_langchain(message: Any) -> Any:
    """Dicts become LangChain messages for a chat model; anything else passes unchanged."""
    if not isinstance(message, Mapping):
        return message
    try:
        from langchain_core.messages import convert_to_messages
    except ImportError:
        return message
    try:
        return convert_to_messages([dict(message)])[0]
    except (ValueError, TypeError, KeyError, NotImplementedError):
        return message


class _ChatModelCounter:
    """The chat model's own count of a one-message request."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, message: Any) -> int:
        return int(self.model.get_num_tokens_from_messages([_to_langchain(message)]))

    def __repr__(self) -> str:
        return f"chat_model_counter({self.model!r:.60})"


def resolve_token_counter(token_counter: Any = None) -> TokenCounter:
    """Return the per-message counter that ``token_counter`` stands for.

    Args:
        token_counter: a callable ``(message) -> int``; an object with
            ``get_num_tokens_from_messages(list)`` (a LangChain chat model); an
            encoding name (``"o200k_base"``, ``"cl100k_base"``; ``"tiktoken"`` is
            ``"o200k_base"``), exact and required; a model name of :data:`MODELS`
            (``"gpt-4o"``, ``"gpt-4"``, ``"claude-sonnet-4-5"``, ``"gemini-2.5-pro"``):
            its exact encoding, or an estimator of :data:`ESTIMATORS`;
            ``"approximate"`` (the heuristic); or ``None``: exact ``o200k_base`` when
            ``agentstate-reducer[tokens]`` is installed, else the heuristic, logged
            once per process.

    Returns:
        A callable ``(message) -> int``.

    Raises:
        ImportError: an exact encoding without the ``tokens`` extra.
        ConfigError: any other value, an unknown model name among them (a
            ``ValueError`` listing the known families); never a silent fallback.

    Example:
        >>> count = resolve_token_counter("approximate")
        >>> count({"role": "user", "content": "hello world"})
        6
    """
    if token_counter is None:
        try:
            return exact_token_counter()
        except ImportError as exc:
            _log_fallback(exc)
            return approximate_token_count
    if isinstance(token_counter, str):
        try:
            counter = _named_counter(token_counter, load=True)
        except ConfigError as exc:
            raise ConfigError(f"token_counter: {exc}") from None
        assert counter is not None
        return counter
    check_token_counter(token_counter)
    if callable(getattr(token_counter, "get_num_tokens_from_messages", None)):
        return _ChatModelCounter(token_counter)
    return token_counter  # type: ignore[no-any-return]


def resolve_budget(
    value: Any, model: Any, name: str, *, window: int | str | None = None
) -> int | None:
    """``max_tokens`` / ``target_tokens`` as tokens: an int, or ``("fraction", f)`` of the
    context window: ``window`` when an int, else that of ``model`` (see
    :func:`context_window`; ``window="full"`` asks for its whole window).

    Raises:
        ConfigError: the value is neither, the fraction is not in (0, 1], or the
            window of ``model`` cannot be told.
    """
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and value[0] == "fraction"
        and isinstance(value[1], (int, float))
        and not isinstance(value[1], bool)
    ):
        share = float(value[1])
        if not 0 < share <= 1:
            raise ConfigError(f"{name}=('fraction', f) needs 0 < f <= 1, got {value!r}")
        if isinstance(window, int):
            return max(1, int(window * share))
        if model is None:
            raise ConfigError(
                f"{name}={value!r} is a share of the model's context window: set model= "
                "(a model name or a chat model) or context_window="
            )
        try:
            size = context_window(model, full=window == "full")
        except ConfigError as exc:
            raise ConfigError(f"{name}={value!r}: {exc}") from None
        return max(1, int(size * share))
    raise ConfigError(f"{name} must be an int, None or ('fraction', f), got {value!r}")
