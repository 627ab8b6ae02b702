"""The outbox interface: durable, deduplicated jobs for pruned messages.

One job holds one pruned message and the namespace it was pruned under. Its
status cycle::

    enqueue
       │
       ▼
     ready ───claim───► claimed ───ack───► done ───purge───► (deleted)
      ▲ ▲                  │ ▲                ▲
      │ └──────────────────┤ └─renew          │
      │                    ▼                  │
      └─────revive───── failed ───discard─────┘

  claimed -> ready: fail, or lease expiry, while attempts < max_attempts;
  claimed -> failed (dead letters): fail at max_attempts (or ``dead=True``), or lease
  expiry at max_attempts. ``edit`` rewrites a dead letter's message.

* ``enqueue`` is idempotent per ``(namespace, key)``: ``key`` is the message id (see
  :func:`id_key`), or ``sha256:<digest>`` of its JSON for a message without one. A key
  already stored, in any status, is skipped, so two processes (or one process after a
  restart) that prune the same message store it once.
* ``claim`` takes the oldest due jobs (FIFO by enqueue order) and leases them to the
  caller under a fresh lease token, in one transaction (one Lua script for Redis): two
  claimers never hold the same job while its lease runs. ``attempts`` counts claims.
* ``ack``, ``fail`` and ``renew`` act only on a job still held under the caller's lease token: a
  worker whose lease expired and was reclaimed by another changes nothing. An expired
  lease that nobody reclaimed yet can still be acknowledged.
* A job whose lease expires is claimed again, or dead-lettered (``failed``) once it was
  claimed ``max_attempts`` times, so a message that crashes every worker stops.

Delivery is at-least-once: a worker can deliver and then die before ``ack``. Deliver
into an idempotent target (a store keyed by message id) and the effect is exactly once.

A backend implements the eleven abstract ``_`` methods below (and ``_get`` for
:meth:`Outbox.get`); validation, encoding and the
public methods live here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import sys
import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

from ..errors import ConfigError, ConfigTypeError, JobDecodeError, OutboxError, UnstorableError
from ..read import MAX_DEPTH as _READ_DEPTH
from ..read import is_serialisation_stub, raw_message_id

__all__ = (
    "CLAIMED",
    "DONE",
    "FAILED",
    "READY",
    "Job",
    "Outbox",
    "Status",
    "check_namespace",
    "decode_message",
    "decode_namespace",
    "encode_message",
    "encode_namespace",
    "id_key",
)

Status = Literal["ready", "claimed", "done", "failed"]
READY: Status = "ready"
CLAIMED: Status = "claimed"
DONE: Status = "done"
FAILED: Status = "failed"

#: ``kind`` of a stored message: a JSON dict, or LangChain ``dumpd`` output.
JSON_KIND = "json"
LANGCHAIN_KIND = "langchain"

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
_MAX_ERROR = 2000
_load_lock = threading.Lock()


#: Nesting a stored message may have (dicts and lists inside each other); deeper ones are
#: refused with an :class:`UnstorableError` naming the index and the field.
MAX_DEPTH = _READ_DEPTH  # the reader's: what every entry point reads, the outbox stores
#: The key of a dict that stands for a value JSON has no type for (``bytes``), or for a
#: dict JSON cannot carry as it is (a key that is not a string, or this key itself).
TAG = "__agentstate__"
_KEY_PREFIXES = ("json:", "sha256:")


def _dumps(value: object, *, canonical: bool = False) -> str:
    text = json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=canonical
    )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 form: escaped as \udXXX it survives every backend.
        text = json.dumps(
            value, ensure_ascii=True, separators=(",", ":"), allow_nan=False, sort_keys=canonical
        )
    return text


def _field(path: tuple[object, ...]) -> str:
    text = "".join("..." if step is ... else f"[{step!r}]" for step in path)
    return text or "(the message itself)"


def _storable(value: Any, path: tuple[object, ...], index: int) -> Any:
    """``value`` made of JSON types only, tagging what JSON lacks; raises naming the field."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _unstorable(index, path, f"the float {value!r}", "a finite number")
        return value
    if len(path) >= MAX_DEPTH:
        raise _unstorable(
            index, (*path[:3], ...), f"nesting deeper than {MAX_DEPTH} levels", "shallower data"
        )
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {TAG: "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        if all(type(k) is str for k in value) and TAG not in value:
            return {k: _storable(v, (*path, k), index) for k, v in value.items()}
        items = []
        for k, v in value.items():
            if not (k is None or type(k) in (str, int, bool, float)):
                raise _unstorable(index, (*path, k), f"a {type(k).__name__} key", "JSON keys")
            items.append([_storable(k, path, index), _storable(v, (*path, k), index)])
        return {TAG: "dict", "items": items}
    if isinstance(value, (list, tuple)):
        return [_storable(v, (*path, i), index) for i, v in enumerate(value)]
    if isinstance(value, (str, int)):  # subclasses (str and int enums): JSON takes them
        return value
    if isinstance(value, float):
        return _storable(float(value), path, index)
    raise _unstorable(index, path, f"a {kind.__name__}", "JSON values or bytes")


def _unstorable(index: int, path: tuple[object, ...], what: str, expected: str) -> UnstorableError:
    return unstorable(
        index, f"field {_field(path)}: the outbox cannot store {what}; expected {expected}"
    )


def unstorable(index: int, detail: str) -> UnstorableError:
    """The :class:`UnstorableError` for message ``index``: what is wrong in ``detail``,
    naming fields and types, never content."""
    error = UnstorableError(f"message at index {index}, {detail}")
    error.index, error.detail = index, detail
    return error


def _restore(value: Any) -> Any:
    """Inverse of :func:`_storable`."""
    if isinstance(value, list):
        return [_restore(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(TAG)
    if tag is None:
        return {k: _restore(v) for k, v in value.items()}
    if tag == "bytes":
        return base64.b64decode(value["base64"])
    if tag == "dict":
        return {_restore(k): _restore(v) for k, v in value["items"]}
    raise JobDecodeError(f"unknown {TAG} tag {tag!r:.40}")


def _langchain_message_class() -> type[Any] | None:
    # A LangChain message can only exist once langchain_core is imported: never import it
    # for the sake of an isinstance check.
    if "langchain_core" not in sys.modules:
        return None
    from langchain_core.messages import BaseMessage

    return BaseMessage


def encode_message(message: object, index: int = 0) -> tuple[str, str]:
    """Return ``(kind, json_text)`` for a dict or a LangChain message.

    Lossless for JSON values, ``bytes`` (tagged, base64) and lone surrogates (escaped);
    tuples come back as lists. Nesting is limited to :data:`MAX_DEPTH`.

    Raises:
        UnstorableError: ``message`` is neither a dict nor a LangChain message, or holds
            a value JSON cannot carry; the error names ``index`` and the field.
    """
    if isinstance(message, Mapping):
        return JSON_KIND, _dumps(_storable(message, (), index))
    base = _langchain_message_class()
    if base is not None and isinstance(message, base):
        from langchain_core.load import dumpd

        # dumpd() would turn bytes into a "not_implemented" stub: tag them first.
        fields = type(message).model_fields
        tagged = message.model_copy(
            update={name: _storable(getattr(message, name), (name,), index) for name in fields}
        )
        data = dumpd(tagged)
        _refuse_stubs(data, index, ())
        return LANGCHAIN_KIND, _dumps(data)
    raise unstorable(
        index,
        f"which is a {type(message).__name__}: the outbox stores dicts of JSON values and "
        "LangChain messages",
    )


def _refuse_stubs(value: Any, index: int, path: tuple[object, ...]) -> None:
    if isinstance(value, dict):
        if is_serialisation_stub(value):
            raise _unstorable(index, path, f"a {value.get('id')!r} LangChain cannot serialise",
                              "JSON values or bytes")
        for k, v in value.items():
            _refuse_stubs(v, index, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _refuse_stubs(v, index, (*path, i))


def decode_message(kind: str, text: str) -> Any:
    """Rebuild a message stored by :func:`encode_message` (LangChain: chat messages only).

    Raises:
        JobDecodeError: ``text`` is not what :func:`encode_message` stores, or ``kind``
            is unknown (the decoder's error chained).
    """
    if kind not in (JSON_KIND, LANGCHAIN_KIND):
        raise JobDecodeError(f"kind must be {JSON_KIND!r} or {LANGCHAIN_KIND!r}, got {kind!r}")
    try:
        value = _restore(json.loads(text))
    except JobDecodeError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise JobDecodeError(f"a stored {kind} message cannot be decoded: {exc!r:.200}") from exc
    if kind == JSON_KIND:
        return value
    try:
        from langchain_core._api import LangChainBetaWarning
        from langchain_core.load import load
    except ImportError as exc:
        raise ImportError(
            "a stored LangChain message needs langchain-core to be rebuilt; "
            'pip install "agentstate-reducer[langgraph]"'
        ) from exc
    # load() is marked beta and warns on every call; the allowlist keeps stored rows from
    # instantiating anything but chat messages.
    with _load_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", LangChainBetaWarning)
        try:
            message = load(value, allowed_objects="messages")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise JobDecodeError(
                f"a stored LangChain message cannot be rebuilt: {type(exc).__name__}"
            ) from exc
    if message is not None and isinstance(message, _langchain_message_class() or ()):
        return message
    raise JobDecodeError(
        f"a stored LangChain message rebuilt as a {type(message).__name__}, not a message"
    )


def _namespace_part(part: object, path: tuple[int, ...]) -> None:
    if part is None or type(part) in (str, int, bool):
        return
    if type(part) is float and math.isfinite(part):
        return
    if isinstance(part, (list, tuple)) and len(path) < MAX_DEPTH:
        for i, inner in enumerate(part):
            _namespace_part(inner, (*path, i))
        return
    where = "".join(f"[{i}]" for i in path)
    raise UnstorableError(
        f"namespace part {where or '(the namespace itself)'} is {part!r:.80} "
        f"({type(part).__name__}); expected None, a string or a tuple of strings, numbers, "
        "booleans and None"
    )


def check_namespace(namespace: object) -> str:
    """Canonical JSON of a namespace (tuples become arrays).

    Raises:
        UnstorableError: a part of ``namespace`` is not a JSON value; the error names it.
    """
    _namespace_part(namespace, ())
    return _dumps(namespace, canonical=True)


#: The historical name of :func:`check_namespace`.
encode_namespace = check_namespace


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def decode_namespace(text: str) -> Any:
    """Inverse of :func:`encode_namespace`; arrays come back as tuples."""
    return _tuples(json.loads(text))


def id_key(ident: object) -> str | None:
    """The stored form of a message id: itself for a plain string, else ``json:<JSON>``.

    ``1`` and ``"1"`` get different keys; an id with a NUL or a lone surrogate (which
    PostgreSQL or UTF-8 cannot hold), or one that looks like an encoded key, is escaped.
    """
    if ident is None or ident == "":
        return None
    if isinstance(ident, str):
        if "\x00" not in ident and not ident.startswith(_KEY_PREFIXES):
            try:
                ident.encode("utf-8")
            except UnicodeEncodeError:
                pass
            else:
                return ident
        return "json:" + json.dumps(ident, ensure_ascii=True)
    if type(ident) in (int, float, bool):
        return "json:" + json.dumps(ident, ensure_ascii=True, allow_nan=True)
    return id_key(str(ident))


def _canonical(value: Any) -> Any:
    """``value`` with every tagged dict's items in key order, as sort_keys orders the rest."""
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get(TAG) == "dict" and isinstance(value.get("items"), list):
        items = [_canonical(item) for item in value["items"]]
        return {**value, "items": sorted(items, key=lambda item: _dumps(item, canonical=True))}
    return {k: _canonical(v) for k, v in value.items()}


def message_key(message: object, kind: str, text: str) -> str:
    """The dedupe key: the message id (see :func:`id_key`), or a digest of its JSON."""
    key = id_key(raw_message_id(message))
    if key is not None:
        return key
    canonical = _dumps(_canonical(json.loads(text)), canonical=True)
    return f"sha256:{hashlib.sha256(f'{kind}:{canonical}'.encode()).hexdigest()}"


class Row(NamedTuple):
    """One job to insert: what a backend's ``_insert`` receives."""

    namespace: str
    key: str
    kind: str
    payload: str


def encode_rows(batch: Sequence[Any], namespace: Any = None) -> list[Row]:
    """The rows :meth:`Outbox.enqueue` stores for ``batch``: one per key, in batch order.

    Raises:
        ConfigTypeError: ``batch`` is not a list of messages.
        UnstorableError: as :meth:`Outbox.enqueue` raises it; nothing is encoded.
    """
    if isinstance(batch, (str, bytes, Mapping)) or not isinstance(batch, Sequence):
        raise ConfigTypeError(f"batch must be a list of messages, got a {type(batch).__name__}")
    ns = check_namespace(namespace)
    rows: dict[str, Row] = {}
    for i, message in enumerate(batch):
        kind, text = encode_message(message, i)
        key = message_key(message, kind, text)
        rows.setdefault(key, Row(ns, key, kind, text))
    return list(rows.values())


@dataclass(frozen=True)
class Job:
    """One message in the outbox, as returned by ``claim`` or ``dead_letters``."""

    #: Increasing in enqueue order within one outbox.
    id: int
    #: The namespace given to ``enqueue`` (arrays come back as tuples).
    namespace: Any
    #: Canonical JSON of the namespace; jobs with equal ``namespace_key`` share it.
    namespace_key: str
    #: The dedupe key: the message id or ``sha256:<digest>``.
    key: str
    #: ``"json"`` or ``"langchain"``.
    kind: str
    #: The stored JSON text.
    payload: str = field(repr=False)
    #: Times this job was claimed, including the current claim.
    attempts: int
    #: The lease token of the claim that returned this job (``""`` for dead letters).
    lease: str = ""
    #: When the lease ends, in seconds since the epoch (server clock for servers).
    lease_expires: float = 0.0
    status: Status = CLAIMED
    #: The error recorded by the last ``fail`` (or lease expiry), if any.
    last_error: str | None = None
    #: Why the stored row cannot be decoded (a corrupted namespace or envelope), if so;
    #: a relay dead-letters such a job alone, with this as its error.
    decode_error: str | None = None

    @property
    def message(self) -> Any:
        """The message, rebuilt from JSON (a new object on every access)."""
        return decode_message(self.kind, self.payload)


def check_identifier(name: str, value: object) -> str:
    """A table name or similar: letters, digits and underscores, not starting with a digit."""
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ConfigError(
            f"{name} must be letters, digits and underscores (at most 48, not starting with "
            f"a digit), got {value!r}"
        )
    return value


def check_one_of(**given: object) -> None:
    """Exactly one of two alternative arguments is given (is not ``None``)."""
    (first, a), (second, b) = given.items()
    if (a is None) == (b is None):
        raise ConfigError(
            f"give exactly one of {first} and {second}, got {first}={a!r}, {second}={b!r}"
        )


def check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
    return value


def check_seconds(name: str, value: object, *, allow_zero: bool) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)


def error_text(error: BaseException | str) -> str:
    """What ``fail`` records: ``Type: message``, cut to a bounded length."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return text.replace("\x00", "")[:_MAX_ERROR]


class Outbox(ABC):
    """Durable jobs for pruned messages; see the module docstring for the status cycle.

    Backends: :class:`~agentstate_reducer.outbox.SQLiteOutbox` (stdlib),
    ``PostgresOutbox`` (``[postgres]`` extra) and ``RedisOutbox`` (``[redis]`` extra).
    Every method is safe to call from several threads and processes at once.

    Args:
        max_attempts: claims a job gets before it is dead-lettered as ``failed``.
    """

    def __init__(self, *, max_attempts: int = 5) -> None:
        #: Claims a job gets before it is dead-lettered.
        self.max_attempts = check_positive_int("max_attempts", max_attempts)

    # -- the public surface --------------------------------------------------------

    def enqueue(self, batch: Sequence[Any], namespace: Any = None) -> int:
        """Store each message of ``batch`` under ``namespace`` as a ``ready`` job.

        All or nothing: the batch is encoded first and stored in one transaction.

        Returns:
            How many jobs were new (keys already stored, or repeated in ``batch``,
            are skipped).

        Raises:
            UnstorableError: a message is neither a dict nor a LangChain message, holds
                a value JSON cannot carry, or ``namespace`` has a part that is not a JSON
                value; the error names the index and field, or the part. Nothing is stored.
            OutboxError: the storage failed.
        """
        rows = encode_rows(batch, namespace)
        if not rows:
            return 0
        return self._insert(rows)

    def claim(self, limit: int = 100, lease_seconds: float = 30.0) -> list[Job]:
        """Lease up to ``limit`` due jobs, oldest first, for ``lease_seconds``.

        Due jobs are ``ready`` ones (past any retry delay) and ``claimed`` ones whose
        lease expired; the latter are dead-lettered instead once they were claimed
        ``max_attempts`` times.
        """
        limit = check_positive_int("limit", limit)
        lease = check_seconds("lease_seconds", lease_seconds, allow_zero=False)
        return sorted(self._claim(limit, lease), key=lambda job: job.id)

    def ack(self, jobs: Iterable[Job]) -> int:
        """Mark ``jobs`` done; returns how many were still held under their lease."""
        pairs = [(job.id, job.lease) for job in _jobs(jobs)]
        return self._ack(pairs) if pairs else 0

    def fail(
        self,
        job: Job,
        error: BaseException | str,
        *,
        retry_after: float = 0.0,
        dead: bool = False,
    ) -> Status | None:
        """Record ``error`` and release ``job``: ``ready`` again after ``retry_after``
        seconds, or ``failed`` once it was claimed ``max_attempts`` times (at once with
        ``dead``, for a job that can never be delivered).

        Returns:
            The job's new status, or ``None`` when its lease was no longer held.
        """
        _job(job, "job")
        delay = check_seconds("retry_after", retry_after, allow_zero=True)
        return self._fail(job.id, job.lease, error_text(error), delay, bool(dead))

    def renew(self, jobs: Iterable[Job], lease_seconds: float) -> int:
        """Extend the lease of ``jobs`` to ``lease_seconds`` from now (a heartbeat).

        Returns:
            How many were still held under their lease (a job another claimer took
            over after its lease expired is not renewed).
        """
        lease = check_seconds("lease_seconds", lease_seconds, allow_zero=False)
        pairs = [(job.id, job.lease) for job in _jobs(jobs)]
        return self._renew(pairs, lease) if pairs else 0

    def counts(self) -> dict[Status, int]:
        """Jobs per status (``claimed`` includes leases that expired but were not reclaimed)."""
        found = self._counts()
        return {status: found.get(status, 0) for status in (READY, CLAIMED, DONE, FAILED)}

    def dead_letters(self, limit: int = 100) -> list[Job]:
        """The oldest ``failed`` jobs, with their ``last_error``."""
        return sorted(self._dead_letters(check_positive_int("limit", limit)), key=lambda j: j.id)

    def revive(self, jobs: Iterable[Job] | None = None) -> int:
        """Make ``failed`` jobs (all of them by default) ``ready`` with zero attempts."""
        ids = None if jobs is None else [job.id for job in _jobs(jobs)]
        if ids == []:
            return 0
        return self._revive(ids)

    def discard(self, jobs: Iterable[Job]) -> int:
        """Give up on dead letters: ``failed`` jobs become ``done`` (their key stays taken
        until :meth:`purge`, so the message is not stored again). Returns how many."""
        ids = [job.id for job in _jobs(jobs)]
        return self._discard(ids) if ids else 0

    def edit(self, job: Job, message: Any) -> bool:
        """Replace the stored message of the dead letter ``job`` (it stays ``failed``:
        :meth:`revive` it to deliver the edit). Returns whether it was a dead letter.

        Raises:
            UnstorableError: ``message`` cannot be stored (nothing changes).
        """
        _job(job, "job")
        kind, text = encode_message(message)
        return self._edit(job.id, kind, text)

    def get(self, ident: object, namespace: Any = None) -> Job | None:
        """The job of the message with id ``ident`` under ``namespace``, in any status
        (``ready``, ``claimed``, ``done``, ``failed``); ``None`` when none was stored
        there or it was purged. Reading leaves the job as it is.

        An original that context editing replaced is stored under its handle, so
        ``get(handle, namespace).message`` is that original (see :meth:`original`).
        """
        key = id_key(ident)
        if key is None:
            raise ConfigTypeError(f"ident must be a message id, got {ident!r:.80}")
        return self._get(check_namespace(namespace), key)

    def original(self, handle: str, namespace: Any = None) -> str | None:
        """The original text behind a context-editing handle (``ctx_...``), read from
        this outbox: pending, delivered or dead-lettered, until :meth:`purge`.

        ``namespace`` is the one the reduce ran under. ``None`` when nothing edited is
        stored under ``handle`` there.
        """
        if not isinstance(handle, str) or not handle:
            raise ConfigTypeError(f"handle must be a non-empty string, got {handle!r:.80}")
        from ..edit import original_text

        job = self.get(handle, namespace)
        if job is None or job.decode_error is not None:
            return None
        return original_text(job.message)

    def purge(self, older_than: float) -> int:
        """Delete ``done`` jobs acknowledged more than ``older_than`` seconds ago.

        Their keys are forgotten: the same message enqueued later is stored again, so
        purge only what can no longer be pruned twice.
        """
        return self._purge(check_seconds("older_than", older_than, allow_zero=True))

    def close(self) -> None:  # noqa: B027 - optional for backends holding nothing
        """Release connections; the outbox must not be used afterwards."""

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- what a backend implements ---------------------------------------------------

    @abstractmethod
    def _insert(self, rows: list[Row]) -> int:
        """Insert ``rows`` (distinct keys) as ready jobs in one transaction; count new ones."""

    @abstractmethod
    def _claim(self, limit: int, lease_seconds: float) -> list[Job]:
        """Dead-letter expired jobs at max attempts, then lease due jobs, atomically."""

    @abstractmethod
    def _ack(self, pairs: list[tuple[int, str]]) -> int:
        """Mark done each ``(id, lease)`` still claimed under that lease; count them."""

    @abstractmethod
    def _fail(
        self, job_id: int, lease: str, error: str, retry_after: float, dead: bool
    ) -> Status | None:
        """Release a job held under ``lease``: ready after ``retry_after``, or failed
        (at ``max_attempts``, or now with ``dead``)."""

    @abstractmethod
    def _renew(self, pairs: list[tuple[int, str]], lease_seconds: float) -> int:
        """Extend each ``(id, lease)`` still claimed under that lease; count them."""

    @abstractmethod
    def _discard(self, ids: list[int]) -> int:
        """Failed jobs with these ids -> done; count them."""

    @abstractmethod
    def _edit(self, job_id: int, kind: str, payload: str) -> bool:
        """Rewrite the message of a failed job; whether it was one."""

    @abstractmethod
    def _counts(self) -> Mapping[str, int]:
        """Jobs per status."""

    @abstractmethod
    def _dead_letters(self, limit: int) -> list[Job]:
        """Up to ``limit`` failed jobs."""

    @abstractmethod
    def _revive(self, ids: list[int] | None) -> int:
        """Failed jobs (with these ids, or all) -> ready with zero attempts; count them."""

    @abstractmethod
    def _purge(self, older_than: float) -> int:
        """Delete done jobs finished more than ``older_than`` seconds ago; count them."""

    @abstractmethod
    def _get(self, namespace: str, key: str) -> Job | None:
        """The job stored under ``(namespace, key)`` in any status, or ``None``."""


def _jobs(values: object) -> list[Job]:
    if isinstance(values, (str, bytes, Mapping, Job)) or not isinstance(values, Iterable):
        raise ConfigTypeError(
            f"jobs must be a list of Job objects returned by claim(), got a "
            f"{type(values).__name__}"
        )
    return [_job(value, "jobs") for value in values]


def _job(value: object, name: str) -> Job:
    if not isinstance(value, Job):
        raise ConfigTypeError(
            f"{name} must hold Job objects returned by claim(), got a {type(value).__name__}"
        )
    return value


def make_job(
    job_id: int,
    namespace: str,
    key: str,
    kind: str,
    payload: str,
    attempts: int,
    *,
    lease: str = "",
    lease_expires: float = 0.0,
    status: Status = CLAIMED,
    last_error: str | None = None,
    decode_error: str | None = None,
) -> Job:
    """Build a :class:`Job` from stored columns (the namespace as stored text).

    A namespace that is not JSON does not raise: the job carries ``decode_error``.
    """
    try:
        decoded = decode_namespace(namespace)
    except ValueError as exc:
        decoded = None
        decode_error = decode_error or f"the stored namespace cannot be decoded: {exc}"
    return Job(
        id=int(job_id),
        namespace=decoded,
        namespace_key=namespace,
        key=key,
        kind=kind,
        payload=payload,
        attempts=int(attempts),
        lease=lease,
        lease_expires=float(lease_expires),
        status=status,
        last_error=last_error,
        decode_error=decode_error,
    )


class _Closable(Protocol):
    def close(self) -> object: ...


_C = TypeVar("_C", bound=_Closable)


class ConnectionPool(Generic[_C]):
    """Idle connections shared by every thread of one process, at most ``max_idle`` kept.

    A thread takes an idle connection or opens one, and gives it back when its call
    returns; one the backend cannot reuse (``reusable`` says, e.g. mid-transaction or
    broken) is closed instead. After ``fork()`` the child never touches its parent's
    connections. ``close()`` closes the idle ones; those in use close when given back.
    """

    def __init__(
        self,
        owner: object,
        open_connection: Callable[[], _C],
        reusable: Callable[[_C], bool],
        max_idle: int,
    ) -> None:
        self._owner = owner
        self._open = open_connection
        self._reusable = reusable
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: list[_C] = []
        self._pid = os.getpid()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[_C]:
        """A connection for the time of one call; raises OutboxError once closed."""
        with self._lock:
            if self._closed:
                raise OutboxError(f"{self._owner!r} is closed")
            if self._pid != os.getpid():
                # Connections inherited through fork() belong to the parent: never touch them.
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            with self._lock:
                keep = not self._closed and len(self._idle) < self.max_idle
                keep = keep and self._reusable(conn)
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def close(self) -> None:
        """Close every idle connection and refuse new calls."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
