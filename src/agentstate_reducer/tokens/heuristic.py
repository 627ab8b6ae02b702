"""The character heuristic: ``o200k_base`` / ``cl100k_base`` tokens of a text estimated
from its bytes, without a tokenizer.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import NamedTuple

from .memo import TextMemo

__all__ = (
    "approximate_text_tokens",
)


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


#: Remembered (a history is counted again on every call), short texts too: a look-up
#: costs a fifth of estimating even a tool name or a call id (0.3 against 1.6 us).
_approximate_o200k = TextMemo(_HEURISTICS["o200k_base"])
