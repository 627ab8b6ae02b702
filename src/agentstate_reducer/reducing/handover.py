"""Handing pruned messages and edited originals over: the dedupe ledger's claims and
releases, the hooks in order, receipts of background hooks, and an edit undone while its
original is not stored."""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Hashable
from concurrent.futures import Future
from typing import Any, NoReturn

from ..config import ReducerResult
from ..edit import ContextEdit
from ..errors import OutboxError, UnstorableError
from ..hooks import NOT_DELIVERED, context_keys, delivery_key
from ..plan import UNSTORED_ORIGINAL
from ..read import MessageRecord, is_injected, message_id, raw_message_id, without_turn_note
from .effects import _Effect, _Hand, _Refused
from .lists import _rebuilt
from .prepare import Prepared
from .summaries import _Summarising

logger = logging.getLogger("agentstate_reducer")


def _log_hook_error(i: int, exc: Exception, pruned: list[Any]) -> None:
    # Ids and types only: an error's text may quote message content.
    logger.error(
        "agentstate-reducer: on_prune[%d] failed on %d message(s) (ids %s): %s; skipped, "
        "released for the next reduce",
        i,
        len(pruned),
        [message_id(m) for m in pruned[:20]],
        type(exc).__name__,
    )


class _Places:
    """Where a message handed to the hooks sits in ``existing + new`` (asked on errors),
    and in the conversation (its ledger key)."""

    def __init__(
        self,
        inputs: list[Any],
        edits: tuple[ContextEdit, ...],
        messages: list[Any],
        added: list[Any],
        read: dict[int, MessageRecord] | None = None,
    ) -> None:
        #: ``existing + new``, as the reduce was given them.
        self._inputs = inputs
        self._edits = edits
        #: The list the plan saw (edited copies, synthetic results), and the synthetic ones.
        self._messages = messages
        self._added = added
        #: The records the reduce read of the pruned messages, by ``id()``.
        self._read = read or {}

    def record(self, message: object) -> MessageRecord | None:
        """The record the reduce read of ``message``, if it read one."""
        return self._read.get(id(message))

    def of(self, message: object) -> int | None:
        for i, m in enumerate(self._inputs):
            if m is message:
                return i
        # An edited original travels as a copy: the index of the message it was made of.
        return next((e.index for e in self._edits if e.original is message), None)

    def keys(self, batch: list[Any], namespace: Any) -> list[Hashable]:
        """The ledger keys of ``batch`` (in conversation order, edited originals after):
        an id-less message is keyed by its place (:func:`~agentstate_reducer.hooks.
        context_keys`) among the messages as they were before any edit, reducer-made
        ones left out, so a key never changes with what editing or repair did."""
        if all(raw_message_id(m) is not None for m in batch):
            return [delivery_key(m, namespace) for m in batch]
        messages = self._messages
        positions: list[int | None] = []
        j = 0
        for m in batch:
            k = j
            if raw_message_id(m) is None:
                # The same object may sit at two places: the next one after the last found.
                while k < len(messages) and messages[k] is not m:
                    k += 1
            if k >= len(messages) or messages[k] is not m:
                positions.append(None)
                continue
            positions.append(k)
            j = k + 1
        conversation: list[Any] = list(messages)
        for edit in self._edits:
            conversation[edit.index] = edit._source
        if self._added:
            made = {id(m) for m in self._added}
            conversation = [None if id(m) in made else m for m in conversation]
        wanted = sorted({p for p in positions if p is not None})
        found = dict(zip(wanted, context_keys(conversation, wanted, namespace), strict=True))
        return [
            delivery_key(m, namespace) if p is None else found[p]
            for m, p in zip(batch, positions, strict=True)
        ]


def _raise_placed(error: UnstorableError, batch: list[Any], places: _Places | None) -> NoReturn:
    """Raise ``error`` with the index of the message at fault in ``existing + new``, not
    in the batch the hook was given (which the dedupe ledger may have shortened)."""
    k = error.index
    where = None
    if places is not None and k is not None and 0 <= k < len(batch):
        where = places.of(batch[k])
    if where is None:
        raise error
    placed = UnstorableError(
        f"message at index {where} of existing + new (index {k} of the pruned batch), "
        f"{error.detail}"
    )
    placed.index, placed.detail = where, error.detail
    raise placed from error


def hand_over(
    reducer: _HandingOver,
    result: ReducerResult[Any],
    handed: list[Any],
    inputs: list[Any],
    prepared: Prepared,
    block: int,
    namespace: Any,
) -> Generator[_Effect, Any, ReducerResult[Any]]:
    """Hand ``handed`` to the hooks (yielding one effect a hook), then ``result`` with
    each edit whose original is not stored yet undone (``block``: the tokens of its
    summary block, for what the survivors then say of the budget)."""
    edits = prepared.edits
    if handed:
        messages, plan, memo = prepared.messages, prepared.plan, prepared.memo
        read = None if memo is None else {id(messages[i]): memo[0][i] for i in plan.pruned}
        places = _Places(inputs, edits, messages, prepared.added, read)
        yield from reducer._hand_over(handed, namespace, places, edits)
    if edits and reducer.config.on_prune:
        unstored = reducer._unstored(result, prepared.messages, edits, namespace)
        if unstored is not result:
            result = reducer._said(unstored, namespace, block, UNSTORED_ORIGINAL)
    return result


class _HandingOver(_Summarising):
    """The ledger and the hooks of a reduce."""

    def _claim(
        self, pruned: list[Any], namespace: Any, places: _Places, sent: dict[int, Any]
    ) -> tuple[list[Any], list[Hashable] | None]:
        """What of ``pruned`` was never delivered, claimed, with its ledger keys; in
        ``sent``, what the hooks get in place of a message a turn note was merged into."""
        # A summary, its acknowledgement or a turn note the package wrote is not
        # conversation: long-term memory never receives it, nor a note that lost its
        # marker (read by its wording), nor one merged into the question's message
        # (which goes over as it was asked, claimed under its own key).
        conversation = []
        for m in pruned:
            if is_injected(m):
                continue
            asked = without_turn_note(m, places.record(m))
            if asked is None:
                continue
            if asked is not m:
                sent[id(m)] = asked
            conversation.append(m)
        if self._ledger is None or not conversation:
            return conversation, None
        keys = places.keys(conversation, namespace)
        fresh = self._ledger.claim(conversation, namespace, keys=keys)
        if len(fresh) == len(conversation):
            return fresh, keys
        taken = {id(m) for m in fresh}
        return fresh, [k for m, k in zip(conversation, keys, strict=True) if id(m) in taken]

    def _release(self, deliver: list[Any], namespace: Any, keys: list[Hashable] | None) -> None:
        # Not every hook took the batch: let a later reduce() hand it over again.
        if self._ledger is not None:
            self._ledger.release(deliver, namespace, keys=keys)

    def _hand_over(
        self,
        handed: list[Any],
        namespace: Any,
        places: _Places,
        edits: tuple[ContextEdit, ...],
    ) -> Generator[_Effect, Any, None]:
        """Hand what was not delivered before to every hook, in order: the pruned
        messages the ledger has not seen, the edited originals not pending or stored. A
        hook that raised is logged and skipped; an :class:`OutboxError` propagates.
        Unless every hook took the batch, it is released for a later reduce; a hook that
        returns a :class:`~concurrent.futures.Future` (``Background``) took it once that
        is done."""
        originals = {id(e.original) for e in edits}
        pruned = [m for m in handed if id(m) not in originals]
        sent: dict[int, Any] = {}
        deliver, keys = self._claim(pruned, namespace, places, sent)
        fresh = self._handoffs.claim([e.original for e in edits], namespace) if edits else []
        claimed = [*deliver, *(m for m, _ in fresh)]
        if not claimed:
            return
        batch = [sent.get(id(m), m) for m in claimed] if sent else claimed
        done = False
        receipts: list[Future[Any]] = []
        try:
            taken = True
            for i, hook in enumerate(self.config.on_prune):
                try:
                    got = yield _Hand(i, hook, batch, namespace)
                except UnstorableError as exc:
                    _raise_placed(exc, claimed, places)
                except (OutboxError, _Refused):
                    raise
                except Exception as exc:
                    _log_hook_error(i, exc, batch)
                    taken = False
                else:
                    taken = taken and got is not NOT_DELIVERED
                    if isinstance(got, Future):
                        receipts.append(got)
            done = taken
        finally:
            # An OutboxError, Ctrl-C, a cancelled task, a hook that failed or dropped it.
            if not done:
                self._release(deliver, namespace, keys)
                self._handoffs.forget(fresh)
        if receipts:
            self._when_done(receipts, deliver, keys, fresh, namespace)
        else:
            self._handoffs.stored(fresh)

    def _when_done(
        self,
        receipts: list[Future[Any]],
        deliver: list[Any],
        keys: list[Hashable] | None,
        fresh: list[tuple[Any, Hashable]],
        namespace: Any,
    ) -> None:
        """Once every receipt is done: the originals are stored, or (one failed) the
        batch is released and its originals forgotten, for a later reduce."""
        left = [len(receipts), 0]  # receipts not done, failures
        lock = threading.Lock()

        def settle(receipt: Future[Any]) -> None:
            failed = receipt.cancelled() or receipt.exception() is not None
            with lock:
                left[0] -= 1
                left[1] += failed
                first_failure = failed and left[1] == 1
                all_stored = left[0] == 0 and left[1] == 0
            if first_failure:
                self._release(deliver, namespace, keys)
                self._handoffs.forget(fresh)
            elif all_stored:
                self._handoffs.stored(fresh)

        for receipt in receipts:
            receipt.add_done_callback(settle)

    def _unstored(
        self,
        result: ReducerResult[Any],
        messages: list[Any],
        edits: tuple[ContextEdit, ...],
        namespace: Any,
    ) -> ReducerResult[Any]:
        """``result`` with each surviving message whose edited original is not stored
        yet as it was before the edit: an edit never outlives its original. A later
        reduce edits it again, and hands the original over if it was not."""
        back: dict[int, Any] = {}
        for edit in edits:
            if not self._handoffs.is_stored(edit.original, namespace):
                back[id(messages[edit.index])] = edit._source
        if not back:
            return result
        surviving = [back.get(id(m), m) for m in result.surviving]
        restored = [(m, e) for m, e in zip(result.surviving, surviving, strict=True) if m is not e]
        if not restored:
            return result  # the edited copies were pruned: they leave the state anyway
        put_back = {id(m) for m, _ in restored}
        kept = tuple(e for e in result.edited if id(messages[e.index]) not in put_back)
        changes: dict[str, Any] = {"surviving": surviving, "edited": kept}
        if result.tokens_after is not None:
            grown = sum(self._count_one(old) - self._count_one(new) for new, old in restored)
            changes["tokens_after"] = result.tokens_after + grown  # over_*: the caller's
        self._remember(surviving, None, None)
        return _rebuilt(result, **changes)
