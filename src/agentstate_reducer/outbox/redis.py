"""The Redis outbox (redis-py): every state change is one Lua script, so it is atomic.

Keys, all under one prefix: ``seq`` (job ids), ``keys`` (dedupe key -> id), ``jobs``
(id -> stored message), ``fields``, ``attempts``, ``leases``, ``errors`` (hashes by id),
and one sorted set per status: ``ready`` and ``failed`` (scored by id, so FIFO),
``delayed`` (by due time), ``claimed`` (by lease expiry), ``done`` (by finish time).
Times use the server's clock (``TIME``).

A job is as durable as the server's persistence: with ``appendonly yes`` it survives
a server restart; the client process being killed loses nothing in any setup. Every
script names all its keys, so on Redis Cluster a prefix holding a hash tag
(``"{outbox}"``) keeps them in one slot.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..errors import ConfigError, ConfigTypeError, OutboxError, UnstorableError
from .base import (
    CLAIMED,
    DONE,
    FAILED,
    READY,
    Job,
    Outbox,
    Row,
    Status,
    check_one_of,
    check_seconds,
    make_job,
)

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        'RedisOutbox needs redis-py: pip install "agentstate-reducer[redis]"'
    ) from exc

__all__ = ("RedisOutbox",)

_T = TypeVar("_T")
_KEYS = (
    "seq",
    "keys",
    "jobs",
    "fields",
    "attempts",
    "leases",
    "errors",
    "ready",
    "delayed",
    "claimed",
    "failed",
    "done",
)
_BATCH = 1000

# KEYS: 1 seq, 2 keys, 3 jobs, 4 fields, 5 attempts, 6 leases, 7 errors,
#       8 ready, 9 delayed, 10 claimed, 11 failed, 12 done.
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

_ENQUEUE = """
local n = 0
for i = 1, #ARGV, 2 do
    if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
        local id = redis.call('INCR', KEYS[1])
        redis.call('HSET', KEYS[2], ARGV[i], id)
        redis.call('HSET', KEYS[3], id, ARGV[i + 1])
        redis.call('HSET', KEYS[4], id, ARGV[i])
        redis.call('ZADD', KEYS[8], id, id)
        n = n + 1
    end
end
return n
"""

_CLAIM = (
    _NOW
    + """
local limit, lease, max, token = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', now, 'LIMIT', 0, 1000)) do
    redis.call('ZREM', KEYS[9], id)
    redis.call('ZADD', KEYS[8], id, id)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now, 'LIMIT', 0, 1000)) do
    redis.call('ZREM', KEYS[10], id)
    redis.call('HDEL', KEYS[6], id)
    local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
    if attempts >= max then
        redis.call('HSET', KEYS[7], id, 'lease expired after ' .. attempts .. ' attempt(s)')
        redis.call('ZADD', KEYS[11], id, id)
    else
        redis.call('ZADD', KEYS[8], id, id)
    end
end
local expires = now + lease
local out = {tostring(expires)}
for _, id in ipairs(redis.call('ZRANGE', KEYS[8], 0, limit - 1)) do
    redis.call('ZREM', KEYS[8], id)
    local attempts = redis.call('HINCRBY', KEYS[5], id, 1)
    redis.call('HSET', KEYS[6], id, token)
    redis.call('ZADD', KEYS[10], expires, id)
    table.insert(out, id)
    table.insert(out, attempts)
    table.insert(out, redis.call('HGET', KEYS[3], id))
end
return out
"""
)

# held(id, lease): whether job ``id`` is claimed under ``lease`` (only its holder may ack,
# fail or renew it); each_held(first, fn): fn(id) for each (id, lease) pair of ARGV from
# ``first`` on whose job is held, returning how many were.
_HELD = """
local function held(id, lease)
    return redis.call('HGET', KEYS[6], id) == lease and redis.call('ZSCORE', KEYS[10], id)
end
local function each_held(first, fn)
    local n = 0
    for i = first, #ARGV, 2 do
        if held(ARGV[i], ARGV[i + 1]) then
            fn(ARGV[i])
            n = n + 1
        end
    end
    return n
end
"""

_ACK = (
    _NOW
    + _HELD
    + """
return each_held(1, function(id)
    redis.call('ZREM', KEYS[10], id)
    redis.call('HDEL', KEYS[6], id)
    redis.call('ZADD', KEYS[12], now, id)
end)
"""
)

_FAIL = (
    _NOW
    + _HELD
    + """
local id = ARGV[1]
if not held(id, ARGV[2]) then
    return false
end
redis.call('ZREM', KEYS[10], id)
redis.call('HDEL', KEYS[6], id)
redis.call('HSET', KEYS[7], id, ARGV[3])
if ARGV[6] == '1' or tonumber(redis.call('HGET', KEYS[5], id) or '0') >= tonumber(ARGV[5]) then
    redis.call('ZADD', KEYS[11], id, id)
    return 'failed'
end
local delay = tonumber(ARGV[4])
if delay > 0 then
    redis.call('ZADD', KEYS[9], now + delay, id)
else
    redis.call('ZADD', KEYS[8], id, id)
end
return 'ready'
"""
)

_RENEW = (
    _NOW
    + _HELD
    + """
local expires = now + tonumber(ARGV[1])
return each_held(2, function(id)
    redis.call('ZADD', KEYS[10], expires, id)
end)
"""
)

# each_failed(ids, fn): fn(id) for each of ``ids`` taken out of the dead letters (the
# ``failed`` set), returning how many were.
_FAILED = """
local function each_failed(ids, fn)
    local n = 0
    for _, id in ipairs(ids) do
        if redis.call('ZREM', KEYS[11], id) == 1 then
            fn(id)
            n = n + 1
        end
    end
    return n
end
"""

_DISCARD = (
    _NOW
    + _FAILED
    + """
return each_failed(ARGV, function(id)
    redis.call('ZADD', KEYS[12], now, id)
end)
"""
)

_EDIT = """
if not redis.call('ZSCORE', KEYS[11], ARGV[1]) then
    return 0
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
"""

_DEAD = """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[11], 0, tonumber(ARGV[1]) - 1)) do
    table.insert(out, id)
    table.insert(out, redis.call('HGET', KEYS[5], id) or '0')
    table.insert(out, redis.call('HGET', KEYS[7], id) or '')
    table.insert(out, redis.call('HGET', KEYS[3], id))
end
return out
"""

_REVIVE = (
    _FAILED
    + """
local ids = ARGV
if #ids == 0 then
    ids = redis.call('ZRANGE', KEYS[11], 0, -1)
end
return each_failed(ids, function(id)
    redis.call('HSET', KEYS[5], id, 0)
    redis.call('ZADD', KEYS[8], id, id)
end)
"""
)

_GET = """
local id = redis.call('HGET', KEYS[2], ARGV[1])
if not id then
    return nil
end
local status = 'ready'
if redis.call('ZSCORE', KEYS[10], id) then
    status = 'claimed'
elseif redis.call('ZSCORE', KEYS[11], id) then
    status = 'failed'
elseif redis.call('ZSCORE', KEYS[12], id) then
    status = 'done'
end
return {id, redis.call('HGET', KEYS[5], id) or '0', redis.call('HGET', KEYS[3], id), status,
    redis.call('HGET', KEYS[7], id) or ''}
"""

_PURGE = (
    _NOW
    + """
local ids = redis.call('ZRANGEBYSCORE', KEYS[12], '-inf', '(' .. (now - tonumber(ARGV[1])),
    'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
    local field = redis.call('HGET', KEYS[4], id)
    if field then
        redis.call('HDEL', KEYS[2], field)
    end
    for k = 3, 7 do
        redis.call('HDEL', KEYS[k], id)
    end
    redis.call('ZREM', KEYS[12], id)
end
return #ids
"""
)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _job(job_id: Any, attempts: Any, blob: Any, **extra: Any) -> Job:
    problem = ""
    try:
        stored = json.loads(_text(blob))
        fields = (stored["n"], stored["k"], stored["d"], stored["p"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        problem = repr(exc)
    else:
        if not all(isinstance(f, str) for f in fields):
            problem = "a field is not a string"
    if problem:
        # A corrupted envelope must not break claim() or dead_letters(): the job carries
        # the error and a relay dead-letters it alone.
        text = blob.decode(errors="replace") if isinstance(blob, bytes) else str(blob)
        return make_job(
            int(job_id), "null", "", "", text, int(attempts),
            decode_error=f"the stored envelope cannot be decoded: {problem}", **extra,
        )
    return make_job(int(job_id), *fields, int(attempts), **extra)


class RedisOutbox(Outbox):
    """An :class:`~agentstate_reducer.outbox.Outbox` in Redis.

    Args:
        url: a Redis URL such as ``redis://localhost:6379/0``.
        client: a ``redis.Redis`` client, instead of ``url``.
        prefix: the start of every key this outbox uses.
        max_attempts: claims a job gets before it is dead-lettered.
        timeout: seconds a command may wait for the server (redis-py's
            ``socket_timeout``), so an outage raises ``OutboxError`` instead of blocking.
        connect_timeout: seconds to connect (``socket_connect_timeout``). Both apply to
            a client built from ``url``; a ``client`` you pass keeps its own settings.

    Example:
        >>> outbox = RedisOutbox("redis://localhost:6379/0")             # doctest: +SKIP
        >>> reducer = MessageReducer(config=ReducerConfig(on_prune=[OutboxHook(outbox)]))
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "agentstate:outbox",
        max_attempts: int = 5,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(max_attempts=max_attempts)
        check_one_of(url=url, client=client)
        if client is not None and not callable(getattr(client, "register_script", None)):
            raise ConfigTypeError(f"client must be a redis.Redis client, got {client!r:.80}")
        if not isinstance(prefix, str) or not prefix:
            raise ConfigError(f"prefix must be a non-empty string, got {prefix!r:.80}")
        self._owns_client = client is None
        self._closed = False
        #: The redis-py client used.
        self.timeout = check_seconds("timeout", timeout, allow_zero=False)
        self.connect_timeout = check_seconds("connect_timeout", connect_timeout, allow_zero=False)
        if url is not None and not isinstance(url, str):
            raise ConfigTypeError(f"url must be a Redis URL string, got {url!r:.80}")
        try:
            self.client: Any = (
                redis.Redis.from_url(
                    url,
                    socket_timeout=self.timeout,
                    socket_connect_timeout=self.connect_timeout,
                    # One retry, on a dropped connection only (a server restart): a
                    # timeout is an outage and raises at once.
                    retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                )
                if url is not None
                else client
            )
        except ValueError as exc:  # redis-py's word for a URL it cannot read
            raise ConfigError(f"url is not a Redis URL: {exc}") from exc
        #: The start of every key.
        self.prefix = prefix
        #: Every key, in the order the scripts expect them.
        self.keys = [f"{prefix}:{name}" for name in _KEYS]
        register = self.client.register_script
        self._enqueue = register(_ENQUEUE)
        self._claim_script = register(_CLAIM)
        self._ack_script = register(_ACK)
        self._fail_script = register(_FAIL)
        self._dead = register(_DEAD)
        self._revive_script = register(_REVIVE)
        self._renew_script = register(_RENEW)
        self._discard_script = register(_DISCARD)
        self._edit_script = register(_EDIT)
        self._purge_script = register(_PURGE)
        self._get_script = register(_GET)

    def __repr__(self) -> str:
        return f"RedisOutbox(prefix={self.prefix!r})"

    def _run(self, action: str, fn: Callable[[], _T]) -> _T:
        if self._closed:
            raise OutboxError(f"{self!r} is closed")
        try:
            return fn()
        except redis.RedisError as exc:
            raise OutboxError(f"{self!r} could not {action}: {exc}") from exc

    def _call(self, action: str, script: Any, args: list[Any]) -> Any:
        return self._run(action, lambda: script(keys=self.keys, args=args))

    def close(self) -> None:
        """Refuse further work; close the client when this object created it from a URL."""
        self._closed = True
        if self._owns_client:
            self.client.close()

    # -- the backend ----------------------------------------------------------------

    def _insert(self, rows: list[Row]) -> int:
        args: list[str] = []
        for row in rows:
            # The namespace is JSON text, which never holds a raw NUL: the split is unique.
            args.append(f"{row.namespace}\x00{row.key}")
            stored = {"n": row.namespace, "k": row.key, "d": row.kind, "p": row.payload}
            args.append(json.dumps(stored))
        return int(self._call("enqueue", self._enqueue, args))

    def _claim(self, limit: int, lease_seconds: float) -> list[Job]:
        token = uuid.uuid4().hex
        out = self._call(
            "claim", self._claim_script, [limit, repr(lease_seconds), self.max_attempts, token]
        )
        expires = float(_text(out[0]))
        return [
            _job(out[i], out[i + 1], out[i + 2], lease=token, lease_expires=expires)
            for i in range(1, len(out), 3)
        ]

    def _ack(self, pairs: list[tuple[int, str]]) -> int:
        args = [value for pair in pairs for value in pair]
        return int(self._call("acknowledge", self._ack_script, args))

    def _fail(
        self, job_id: int, lease: str, error: str, retry_after: float, dead: bool
    ) -> Status | None:
        args = [job_id, lease, error, repr(retry_after), self.max_attempts, int(dead)]
        status = self._call("record a failure", self._fail_script, args)
        if status is None:
            return None
        return FAILED if _text(status) == FAILED else READY

    def _renew(self, pairs: list[tuple[int, str]], lease_seconds: float) -> int:
        args: list[Any] = [repr(lease_seconds), *(value for pair in pairs for value in pair)]
        return int(self._call("renew leases", self._renew_script, args))

    def _discard(self, ids: list[int]) -> int:
        return int(self._call("discard dead letters", self._discard_script, list(ids)))

    def _edit(self, job_id: int, kind: str, payload: str) -> bool:
        def edit() -> bool:
            blob = self.client.hget(self.keys[2], job_id)
            if blob is None:
                return False
            try:
                stored = json.loads(_text(blob))
                stored["d"], stored["p"] = kind, payload
            except (ValueError, TypeError) as exc:
                raise UnstorableError(
                    f"job {job_id}'s stored envelope cannot be decoded ({exc}); discard it"
                ) from exc
            return bool(self._edit_script(keys=self.keys, args=[job_id, json.dumps(stored)]))

        return self._run("edit a dead letter", edit)

    def _counts(self) -> Mapping[str, int]:
        def count() -> list[int]:
            pipe = self.client.pipeline(transaction=True)
            for name in ("ready", "delayed", "claimed", "done", "failed"):
                pipe.zcard(f"{self.prefix}:{name}")
            return [int(n) for n in pipe.execute()]

        ready, delayed, claimed, done, failed = self._run("count jobs", count)
        return {"ready": ready + delayed, "claimed": claimed, "done": done, "failed": failed}

    def _dead_letters(self, limit: int) -> list[Job]:
        out = self._call("read dead letters", self._dead, [limit])
        return [
            _job(
                out[i], out[i + 1], out[i + 3], status=FAILED, last_error=_text(out[i + 2]) or None
            )
            for i in range(0, len(out), 4)
        ]

    def _get(self, namespace: str, key: str) -> Job | None:
        found = self._call("look a job up", self._get_script, [f"{namespace}\x00{key}"])
        if found is None:
            return None
        job_id, attempts, blob, status, error = found
        kind = _text(status)
        assert kind in (READY, CLAIMED, DONE, FAILED)
        return _job(job_id, attempts, blob, status=kind, last_error=_text(error) or None)

    def _revive(self, ids: list[int] | None) -> int:
        return int(self._call("revive dead letters", self._revive_script, ids or []))

    def _purge(self, older_than: float) -> int:
        total = 0
        while True:
            n = int(self._call("purge done jobs", self._purge_script, [repr(older_than), _BATCH]))
            total += n
            if n < _BATCH:
                return total
