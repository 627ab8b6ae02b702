"""Send a model request again, once, after the provider refused it: the driver every
integration wires (the rules are in :mod:`agentstate_reducer.recovery`)."""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, TypeVar

from ._drivers import _adrive, _Call, _drive
from .config import ReducerResult
from .errors import ConfigTypeError
from .hooks import namespace_key as _key
from .recovery import SIGNATURE, ProviderError, classify_error, retry_size
from .recovery import strip_reasoning as _strip
from .reducer import MessageReducer
from .tokens import REPLY_PRIMING_TOKENS

__all__ = ("Recovery",)

logger = logging.getLogger("agentstate_reducer")

_T = TypeVar("_T")
#: Namespaces whose recovery state (message caps, stripped reasoning) is remembered.
_MAX_THREADS = 10_000


def _surviving(result: ReducerResult[Any]) -> list[Any]:
    return list(result.surviving)


class _Reduce(enum.Enum):
    """The retry is what the reducer makes of the messages sent (token mode: the ceiling
    was lowered)."""

    REDUCE = "reduce"


_REDUCE = _Reduce.REDUCE


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class Recovery:
    """Retry a refused model request once: smaller after a context-length error, without
    the reasoning of earlier turns after a signature error.

    * **Too large** (:data:`~agentstate_reducer.recovery.OVERFLOW`). In token mode the
      reducer's calibration of ``namespace`` learns the input tokens the error states
      (with ``calibrate_from_usage``), its ceiling is lowered to
      :func:`~agentstate_reducer.recovery.retry_size` of the refused request, and the
      request is reduced again (hooks run as in any reduce); the ceiling stays, so every
      later reduce of the thread keeps under it. In count mode the retry keeps that share
      of the messages, and so does every later request of the thread (request only: the
      stored history is the reducer's to bound).
    * **Signature rejected** (:data:`~agentstate_reducer.recovery.SIGNATURE`): the
      reasoning of earlier turns is dropped whole (:func:`~agentstate_reducer.recovery.
      strip_reasoning`), the current turn's kept byte for byte; from then on every request
      of the thread is sent so.

    A second refusal raises as the provider raised it. An error it does not recognise
    is raised at once, and so is the first one when the retry would send the very same
    request (nothing more can go).

    Args:
        reducer: the reducer the integration runs.
        finish: turns a reduce's result into the messages to send (default: the
            survivors).
    """

    def __init__(
        self,
        reducer: MessageReducer,
        *,
        finish: Callable[[ReducerResult[Any]], list[Any]] = _surviving,
    ) -> None:
        if not isinstance(reducer, MessageReducer):
            raise ConfigTypeError(f"reducer must be a MessageReducer, got {reducer!r}")
        #: The reducer whose budget a refusal lowers.
        self.reducer = reducer
        self._finish = finish
        self._lock = threading.Lock()
        self._caps: OrderedDict[Any, int] = OrderedDict()
        self._stripped: OrderedDict[Any, None] = OrderedDict()
        #: Retries sent, and how many of them failed again.
        self.retries = 0
        self.failed_retries = 0

    # -- the decisions -----------------------------------------------------------------

    def prepare(self, messages: Sequence[Any], namespace: Any = None) -> list[Any]:
        """``messages`` as this thread's past refusals say to send them (the first attempt)."""
        out = list(messages)
        key = _key(namespace)
        with self._lock:
            cap = self._caps.get(key)
            strip = key in self._stripped
        if cap is not None and len(out) > cap:
            out = self._finish(self._counted(cap).reduce(out))
        if strip:
            out = _strip(out)[0]
        return out

    def diagnose(self, error: BaseException) -> ProviderError | None:
        """What ``error`` says (:func:`~agentstate_reducer.recovery.classify_error`)."""
        return classify_error(error)

    def _learn(self, sent: list[Any], found: ProviderError, namespace: Any) -> list[Any] | None:
        """Remember what the refusal says; the messages of the retry, or ``None`` when
        the reducer must reduce ``sent`` again (token mode: the ceiling was lowered)."""
        key = _key(namespace)
        if found.kind == SIGNATURE:
            with self._lock:
                self._stripped[key] = None
                self._stripped.move_to_end(key)
                while len(self._stripped) > _MAX_THREADS:
                    self._stripped.popitem(last=False)
            retry, changed = _strip(sent)
            logger.warning(
                "agentstate-reducer: the provider rejected a reasoning signature; retrying "
                "once without the reasoning of earlier turns (%d messages changed)", changed,
            )
            return retry
        reducer = self.reducer
        if not reducer.config.token_mode:
            size = retry_size(len(sent), tokens=found.tokens, limit=found.limit)
            with self._lock:
                size = min(size, self._caps.get(key, size))
                self._caps[key] = size
                self._caps.move_to_end(key)
                while len(self._caps) > _MAX_THREADS:
                    self._caps.popitem(last=False)
            logger.warning(
                "agentstate-reducer: the provider refused %d messages as too large; "
                "retrying once with at most %d", len(sent), size,
            )
            return self._finish(self._counted(size).reduce(sent))
        estimated = reducer.request_tokens(sent)
        calibration = reducer.calibration(namespace)
        if found.tokens and reducer.config.calibrate_from_usage:
            reducer.calibrate(sent, found.tokens, namespace=namespace)
        size = retry_size(
            estimated, tokens=found.tokens, limit=found.limit, factor=calibration.factor
        )
        # The ceiling bounds what a budget does (messages and overhead): not the priming.
        ceiling = calibration.cap(max(1, size - REPLY_PRIMING_TOKENS))
        logger.warning(
            "agentstate-reducer: the provider refused a request of about %d tokens as too "
            "large (it says %s of %s); retrying once under %d",
            estimated, found.tokens, found.limit, ceiling,
        )
        return None

    def _counted(self, size: int) -> MessageReducer:
        """A reducer keeping at most ``size`` messages, with no hooks: what it drops stays
        in the stored history, which the real reducer bounds."""
        config = self.reducer.config
        keep = max(0, size - 1) if config.preserve_first else size  # the first kept besides
        config = dataclasses.replace(
            config,
            max_messages=keep,
            min_messages=keep,
            on_prune=[],
            summarize_fn=None,
            inject_summary=False,
            summary_message_factory=None,
            dedupe_on_prune=False,
        )
        return MessageReducer(config=config)

    def _decide(
        self, sent: list[Any], error: BaseException, namespace: Any
    ) -> list[Any] | _Reduce | None:
        """The retry after ``error`` refused ``sent``, as far as it is known without a
        reduce: ``None`` when retrying cannot help, ``_REDUCE`` when it is what the
        reducer makes of ``sent``."""
        found = self.diagnose(error)
        if found is None:
            return None
        retry = self._learn(sent, found, namespace)
        return _REDUCE if retry is None else retry

    def retry_messages(
        self, sent: Sequence[Any], error: BaseException, namespace: Any = None
    ) -> list[Any] | None:
        """The messages to send once more after ``error`` refused ``sent``, or ``None``
        when retrying cannot help (raise ``error``). Runs ``reducer.reduce()``."""
        return _drive(self._retrying(list(sent), error, namespace))

    async def aretry_messages(
        self, sent: Sequence[Any], error: BaseException, namespace: Any = None
    ) -> list[Any] | None:
        """:meth:`retry_messages` awaiting ``reducer.areduce()``."""
        return await _adrive(self._retrying(list(sent), error, namespace))

    def _retrying(
        self, sent: list[Any], error: BaseException, namespace: Any
    ) -> Generator[_Call, Any, list[Any] | None]:
        """What :meth:`retry_messages` decides, yielding the reduce it may need."""
        retry = self._decide(sent, error, namespace)
        if retry is _REDUCE:
            reducer = self.reducer
            retry = self._finish(
                (yield _Call(reducer.reduce, reducer.areduce, sent, namespace=namespace))
            )
        return None if retry is None or _same(retry, sent) else retry

    # -- the drivers -------------------------------------------------------------------

    def call(
        self, messages: Sequence[Any], send: Callable[[list[Any]], _T], *, namespace: Any = None
    ) -> _T:
        """``send(messages)``, and once more with :meth:`retry_messages` if it is refused.

        The second ``send`` is made outside the handler of the first error, so its error
        (if any) reaches the caller exactly as the provider raised it.
        """
        result: _T = _drive(self._calling(messages, send, namespace))
        return result

    async def acall(
        self,
        messages: Sequence[Any],
        send: Callable[[list[Any]], Awaitable[_T]],
        *,
        namespace: Any = None,
    ) -> _T:
        """The async twin of :meth:`call`."""
        result: _T = await _adrive(self._calling(messages, send, namespace))
        return result

    def _calling(
        self, messages: Sequence[Any], send: Callable[[list[Any]], Any], namespace: Any
    ) -> Generator[_Call, Any, Any]:
        """What :meth:`call` does, yielding each send and the reduce a retry may need."""
        sent = self.prepare(messages, namespace)
        try:
            return (yield _Call(send, send, sent))
        except Exception as exc:
            retry = yield from self._retrying(sent, exc, namespace)
            if retry is None:
                raise
        self.retries += 1
        try:
            return (yield _Call(send, send, retry))
        except Exception:
            self.failed_retries += 1
            raise
