"""trim_messages: LangChain-compatible trimming to a token budget that never splits a tool pair.

The selection follows ``langchain_core.messages.trim_messages`` (strategies, partial
messages, ``start_on``/``end_on``, ``include_system``); with ``keep_tool_pairs`` it then
removes what the cut separated: tool results whose call was trimmed away and ai
messages whose results were.

Speed: with a per-message counter (``"approximate"``, a chat model, or a callable over
one message) each message is counted at most once, and only from the end being kept
until the budget is spent; a callable over a list of messages is called on candidate
lists found by galloping then bisection, O(log n) calls.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, compress
from operator import itemgetter
from typing import Any, Literal, NamedTuple, TypeVar, cast

from ._trim_args import MessageTypeSpec, _counts_one_message, _TypeMatch, _validate
from .errors import ConfigTypeError
from .plan import Parents, Results, link_calls, response_units
from .read import (
    BLANK_PART,
    REASONING_PART,
    SYSTEM,
    MessageRecord,
    content_kinds,
    message_content,
    read_message,
    text_block,
    too_deep_among,
    with_content,
)
from .tokens import (
    TokenCounter,
    count_back,
    read_counted,
    resolve_token_counter,
)

__all__ = ("MessageTypeSpec", "TrimSelection", "trim_messages", "trim_selection")

M = TypeVar("M")


#: Kept messages as ``(input index, message)``; a partial message is a copy at its index.
_Kept = list[tuple[int, Any]]
_index, _message = itemgetter(0), itemgetter(1)
#: Views of the partial copies, by input index.
_Copies = dict[int, MessageRecord]


# -- token counters ---------------------------------------------------------------


class _Views(dict[int, MessageRecord]):
    """Message views by index (``0 <= index < len(messages)``), each read once, on demand.

    A dict, so a view read already is looked up at C level (the links and the tool
    pairs ask for every kept view); ``len`` is the number of messages. Trimming reads a
    view's role, calls, answers and group only: the counter may leave a plain text
    message's view as its role alone (``read.chat.PLAIN_VIEWS``).
    """

    def __init__(self, messages: list[Any]) -> None:
        super().__init__()
        self._messages = messages

    def __len__(self) -> int:
        return len(self._messages)

    def __missing__(self, index: int) -> MessageRecord:
        view = self[index] = read_message(self._messages[index], index)
        return view

    def remember(self, index: int, view: MessageRecord) -> None:
        """Keep a view read elsewhere (by the counter): ``read_message``'s record."""
        self[index] = view


class _Sizer:
    """Token cost of candidate results.

    With a per-message counter, each message is counted at most once; with a list
    counter, the counter sees each candidate list in conversation order.
    """

    def __init__(self, messages: list[Any], views: _Views, token_counter: Any) -> None:
        self._messages = messages
        self._views = views
        self.per_message: TokenCounter | None = None
        self._whole: Callable[[list[Any]], Any] | None = None
        if (
            callable(token_counter)
            and not hasattr(token_counter, "get_num_tokens_from_messages")
            and not _counts_one_message(token_counter)
        ):
            self._whole = token_counter
        else:
            self.per_message = resolve_token_counter(token_counter)
        self._counts: dict[int, float] = {}
        #: The indices issuing or answering calls among those :meth:`back` read with a
        #: built-in counter, ascending; ``None`` when it did not.
        self._linking: list[int] | None = None
        #: The same of the messages whose records group (see ``record_group``).
        self._grouped: list[int] | None = None

    def one(self, index: int) -> float:
        """The per-message count of ``messages[index]`` (per-message counters only)."""
        count = self._counts.get(index)
        if count is None:
            assert self.per_message is not None
            message = self._messages[index]
            # A built-in counter reads the view and the count of a common shape at once.
            read = read_counted(message, self.per_message, index)
            if read is None:
                self._views[index]  # an unreadable message fails here, naming its index
                count = self.per_message(message)
            else:
                self._views.remember(index, read[0])
                count = read[1]
            self._counts[index] = count
        return count

    def back(self, stop: int, first: int, used: float, budget: float) -> tuple[int, float]:
        """``(lo, used)``: the longest run ``[lo, stop)``, ``lo >= first``, whose counts keep
        ``used`` within ``budget``, counted from the end (per-message counters only)."""
        assert self.per_message is not None
        linking: list[int] = []
        grouped: list[int] = []
        counter = self.per_message
        run = count_back(self._messages, stop, first, used, budget, counter, linking, grouped)
        if run is not None:  # a built-in counter: read and counted in one loop
            lo, used, records = run
            linking.reverse()
            grouped.reverse()
            self._linking, self._grouped = linking, grouped
            at = range(stop - 1, stop - 1 - len(records), -1)
            self._views.update(zip(at, records, strict=True))
            return lo, used
        lo = stop
        while lo > first:
            cost = self.one(lo - 1)
            if used + cost > budget:
                break
            used += cost
            lo -= 1
        return lo, used

    def linking(self, lo: int, hi: int) -> list[int] | None:
        """The indices in ``[lo, hi)`` of the messages issuing or answering calls, ascending,
        when :meth:`back` read the run and noted them; else ``None``."""
        found = self._linking
        if found is None:
            return None
        return found[bisect_left(found, lo) : bisect_left(found, hi)]

    def groups(self, lo: int, hi: int) -> bool | None:
        """Whether a message in ``[lo, hi)`` groups, when :meth:`back` read the run and noted
        them; else ``None``."""
        found = self._grouped
        if found is None:
            return None
        return bisect_left(found, lo) < bisect_left(found, hi)

    def cost(self, candidate: list[Any]) -> float:
        """The list counter's count of a whole candidate list (list counters only)."""
        assert self._whole is not None
        return self._whole(candidate)  # type: ignore[no-any-return]


def _largest(fits: Callable[[int], bool], lo: int, hi: int) -> int:
    """Largest ``k`` in ``[lo, hi]`` with ``fits(k)``, or ``lo - 1``; ``fits`` must be monotone.

    Gallops from ``lo`` then bisects, so the probes stay near the answer.
    """
    if lo > hi or not fits(lo):
        return lo - 1
    good, step = lo, 1
    while good < hi:
        probe = min(good + step, hi)
        if not fits(probe):
            bad = probe
            break
        good, step = probe, step * 2
    else:
        return good
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


# -- partial messages ----------------------------------------------------------------


def _split_lines(text: str) -> list[str]:
    """Split after each newline, keeping it, so the pieces join back to ``text``."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + [parts[-1]]


def _splitter(text_splitter: Any) -> Callable[[str], list[str]]:
    if text_splitter is None:
        return _split_lines
    split_text = getattr(text_splitter, "split_text", None)  # a LangChain TextSplitter
    if callable(split_text):
        return split_text  # type: ignore[no-any-return]
    if callable(text_splitter):
        return text_splitter  # type: ignore[no-any-return]
    raise ConfigTypeError(
        f"text_splitter must be a callable str -> list[str] or an object with split_text(), "
        f"got {text_splitter!r}"
    )


def _partial(
    message: M,
    fits: Callable[[M], bool],
    split: Callable[[str], list[str]],
    keep_end: bool,
) -> M | None:
    """The largest part of ``message`` that fits, as a copy, or ``None``.

    List content keeps whole leading blocks for either strategy, as the documented
    examples show (``langchain_core`` keeps trailing blocks for ``"last"``); when not
    even one fits and the first (``keep_end``: last) block is text, or the content is a
    string, it keeps leading (``keep_end``: trailing) pieces of that text as string
    content. Content with a reasoning block (Anthropic ``thinking``, a Converse
    ``reasoningContent``, ...) is never cut: the reasoning stays with what it precedes.
    """
    content = message_content(message)
    text: str | None = None
    if isinstance(content, list) and content:
        if REASONING_PART in content_kinds(message):
            return None  # reasoning goes with the calls and text it precedes: whole or not at all
        blocks = list(content)

        def with_blocks(j: int) -> M:
            return with_content(message, blocks[:j])

        j = _largest(lambda j: fits(with_blocks(j)), 1, len(blocks) - 1)
        if j >= 1:
            return with_blocks(j)
        text = text_block(blocks[-1] if keep_end else blocks[0])
    elif isinstance(content, str):
        text = content
    if text is None:
        return None
    pieces = list(split(text))

    def with_pieces(j: int) -> M:
        return with_content(message, "".join(pieces[len(pieces) - j :] if keep_end else pieces[:j]))

    j = _largest(lambda j: fits(with_pieces(j)), 1, len(pieces))
    return with_pieces(j) if j >= 1 else None


# -- tool pairs ------------------------------------------------------------------------


def _units_around(
    views: _Views, n: int, start: int, stop: int, inside: bool | None = None
) -> tuple[tuple[int, int], ...]:
    """The multi-item model responses (see :func:`~agentstate_reducer.plan.response_units`)
    meeting the run ``[start, stop)``, reading one message past each end.

    ``inside=False`` says no message of the run groups: no two of its neighbours then
    join, and a run of two or more is met only by a response through one of its ends,
    read from the two messages there."""
    if inside is False and stop - start >= 2:
        edges = (start - 1, stop - 1) if start else (stop - 1,)
        return tuple(
            (at + b, at + e)
            for at in edges
            if at + 2 <= n
            for b, e in response_units([views[at], views[at + 1]])
        )
    lo, hi = max(0, start - 1), min(n, stop + 1)
    found = response_units(list(map(views.__getitem__, range(lo, hi))))
    return tuple((lo + b, lo + e) for b, e in found)


def _drop_split_pairs(
    kept: _Kept,
    views: _Views,
    parents: Parents,
    results: Results,
    copies: _Copies,
    units: tuple[tuple[int, int], ...] = (),
) -> _Kept:
    """Remove kept tool results whose call is not kept (or was never issued), kept ai
    messages whose results were trimmed, and what is kept of a model response the cut
    split (a reasoning item without its call), until none is left."""
    if not copies and (
        not kept
        or (
            kept[-1][0] + 1 - kept[0][0] == len(kept)  # no gap
            and _closed(kept[0][0], kept[-1][0] + 1, parents, results, units)
        )
    ):
        return kept
    while kept:
        at = set(map(_index, kept))
        lo, hi = kept[0][0], kept[-1][0] + 1
        # Only a message answering calls (it has parents) or an issuer whose calls are
        # answered (it has results: every kept parent has) can lose its pair.
        answering = compress(range(lo, hi), parents[lo:hi])
        answers = {j: set((copies.get(j) or views[j]).answers) for j in answering if j in at}
        calls = {i: set((copies.get(i) or views[i]).calls) for i in results if i in at}
        drop: set[int] = set()
        for j, found in answers.items():
            # A partial copy answers some of the original's calls: link by the original.
            for call, p in zip(views[j].answers, parents[j] or (), strict=True):
                if call in found and (p is None or call not in calls.get(p, ())):
                    drop.add(j)
        for i, found in calls.items():
            for j, call in results.get(i, ()):
                if call in found and call not in answers.get(j, ()):
                    drop.add(i)
        for begin, end in units:
            inside = [i for i in range(begin, end) if i in at and i not in drop]
            if inside and len(inside) < end - begin:
                drop.update(inside)
        if not drop:
            return kept
        kept = [(i, m) for i, m in kept if i not in drop]
    return kept


def _closed(
    lo: int, hi: int, parents: Parents, results: Results, units: tuple[tuple[int, int], ...]
) -> bool:
    """Whether the run of whole messages ``[lo, hi)`` splits no pair: every call it answers
    was issued in it, every result of its calls is in it, and no model response is cut
    (so :func:`_drop_split_pairs` drops nothing). Read at C level."""
    if lo >= hi:
        return True
    issuers = list(chain.from_iterable(filter(None, parents[lo:hi])))
    if None in issuers or min(cast("list[int]", issuers), default=lo) < lo:
        return False
    answered = map(_index, chain.from_iterable(results.values()))
    if max(answered, default=-1) >= hi:
        return False
    return all(end <= lo or begin >= hi or lo <= begin < end <= hi for begin, end in units)


# -- the entry point -------------------------------------------------------------------


def trim_messages(
    messages: Iterable[M],
    *,
    max_tokens: float,
    token_counter: Any,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: MessageTypeSpec | None = None,
    start_on: MessageTypeSpec | None = None,
    include_system: bool = False,
    text_splitter: Callable[[str], list[str]] | Any | None = None,
    keep_tool_pairs: bool = True,
) -> list[M]:
    """Trim ``messages`` to at most ``max_tokens``, as ``langchain_core``'s ``trim_messages`` does.

    ``strategy="first"`` keeps the longest prefix that fits, ``"last"`` the longest
    suffix (after the leading system message with ``include_system``). Works on dicts
    (OpenAI, LangChain-serialised, Anthropic) and message objects and returns the same
    objects; a partial message is a copy. The input is never mutated.

    Laws (tested): the result is an order-preserving selection of the input (a partial
    message standing for its original); it fits ``max_tokens`` unless it is only the
    system message kept by ``include_system``; with ``keep_tool_pairs`` no kept tool
    result lost its call, no kept ai message lost a result to the cut, and a model
    response of several items (a Responses ``reasoning`` item and its calls) is kept
    whole or not at all;
    ``trim(trim(xs)) == trim(xs)`` for additive counters.

    Args:
        messages: the history, in order (an iterable, or an object with ``to_messages()``);
            ``None`` is an empty list, as for ``reduce()``.
        max_tokens: the budget.
        token_counter: ``"approximate"``, an encoding or model name (``"o200k_base"``,
            ``"gpt-4o"``, ...; see :func:`~agentstate_reducer.tokens.resolve_token_counter`),
            a chat model (``get_num_tokens_from_messages``),
            a callable over one message (its first parameter annotated with a message
            type such as ``BaseMessage`` or ``dict``), or a callable over a list of
            messages (unannotated or annotated as a list, e.g. ``len``); ``None`` means
            the package's default counter.
        strategy: ``"last"`` (keep the end) or ``"first"`` (keep the start).
        allow_partial: keep part of the message at the boundary: whole content blocks,
            else pieces of its text from ``text_splitter``.
        end_on: with ``"last"``, first drop trailing messages until one of these types;
            with ``"first"``, drop them from the result.
        start_on: ``"last"`` only: drop leading messages of the result until one of these
            types (the system message kept by ``include_system`` excepted).
        include_system: ``"last"`` only: always keep a leading system message.
        text_splitter: ``str -> list[str]`` whose pieces join back to the text, or a
            LangChain ``TextSplitter``; default: split after each newline.
        keep_tool_pairs: remove tool results whose calling ai message was trimmed, and
            ai messages whose tool results were trimmed (Anthropic ``tool_result`` blocks
            in user messages count as results). ``False`` gives LangChain's output.

    Returns:
        A new list of the kept messages.

    Raises:
        ConfigTypeError: (a ``ValueError`` and a ``TypeError``) an argument has the wrong
            type: ``messages`` is not a sequence, ``max_tokens`` is not a number, a flag
            is not ``True`` / ``False``, ``token_counter`` is not a counter,
            ``text_splitter`` is not a splitter, ``start_on`` / ``end_on`` hold neither
            role names nor classes; the error names the argument.
        ConfigError: (a ``ValueError``) an argument has a wrong value: ``max_tokens``
            is NaN, ``strategy`` is unknown, ``start_on`` / ``end_on`` name
            an unknown role, ``token_counter`` names no known counter, or ``start_on`` /
            ``include_system`` is given with ``strategy="first"``.
        MessageFormatError: (a ``TypeError``) a message cannot be read; the error names
            its index and the field.

    Example:
        >>> history = [{"role": "system", "content": "be brief"}] + [
        ...     {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        ...     for i in range(6)]
        >>> kept = trim_messages(history, max_tokens=3, token_counter=len,
        ...                      include_system=True, start_on="human")
        >>> [m["content"] for m in kept]
        ['be brief', 'turn 4', 'turn 5']
    """
    items, head, body, _ = _selection(
        messages, max_tokens, token_counter, strategy, allow_partial, end_on, start_on,
        include_system, text_splitter, keep_tool_pairs,
    )
    kept = list(map(_message, head))
    if isinstance(body, range):  # a run of whole messages: a slice of the input
        kept += items[body.start : body.stop]
    else:
        kept += map(_message, body)
    return kept


class TrimSelection(NamedTuple):
    """What :func:`trim_selection` keeps, by input index."""

    #: ``(input index, message)`` in output order; the message is the input object, or
    #: a partial copy of it when the index is in :attr:`partial`.
    kept: list[tuple[int, Any]]
    #: Input indices whose kept message is a partial copy.
    partial: frozenset[int]


def trim_selection(
    messages: Iterable[Any],
    *,
    max_tokens: float,
    token_counter: Any,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: MessageTypeSpec | None = None,
    start_on: MessageTypeSpec | None = None,
    include_system: bool = False,
    text_splitter: Callable[[str], list[str]] | Any | None = None,
    keep_tool_pairs: bool = True,
) -> TrimSelection:
    """:func:`trim_messages`' selection, with the input index of each kept message.

    The options are :func:`trim_messages`' own; the CLI reports what was kept, cut or
    made partial from this instead of matching the output back to the input.
    """
    items, head, body, partial = _selection(
        messages, max_tokens, token_counter, strategy, allow_partial, end_on, start_on,
        include_system, text_splitter, keep_tool_pairs,
    )
    if isinstance(body, range):
        body = list(zip(body, items[body.start : body.stop], strict=True))
    return TrimSelection(head + body, partial)


#: What the selection keeps after the head (the kept system message): a run of whole
#: input messages by index, or ``(input index, message)`` entries.
_Body = range | _Kept


def _selection(
    messages: Iterable[Any],
    max_tokens: float,
    token_counter: Any,
    strategy: str,
    allow_partial: bool,
    end_on: MessageTypeSpec | None,
    start_on: MessageTypeSpec | None,
    include_system: bool,
    text_splitter: Any,
    keep_tool_pairs: bool,
) -> tuple[list[Any], _Kept, _Body, frozenset[int]]:
    """The arguments checked, ``(items, head, body, partial)``: the input as a list, the
    kept system message, the rest of what is kept, and the partial copies' indices."""
    _validate(
        strategy,
        start_on,
        include_system,
        max_tokens,
        token_counter=token_counter,
        end_on=end_on,
        allow_partial=allow_partial,
        keep_tool_pairs=keep_tool_pairs,
        text_splitter=text_splitter,
    )
    if messages is None:
        return [], [], range(0), frozenset()
    to_messages = getattr(messages, "to_messages", None)
    if callable(to_messages):  # a LangChain PromptValue
        messages = to_messages()
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise ConfigTypeError(
            # The type only: a message's repr quotes its content.
            f"messages must be a sequence of messages, got a {type(messages).__name__}; a "
            "single message goes in a list"
        )
    items: list[Any] = list(messages)
    try:
        return _select(
            items, max_tokens, token_counter, strategy, allow_partial, end_on, start_on,
            include_system, text_splitter, keep_tool_pairs,
        )
    except RecursionError:  # a message too deep to count, copy or split
        error = too_deep_among(items)
        if error is None:
            raise
        raise error from None


def _select(
    items: list[Any],
    max_tokens: float,
    token_counter: Any,
    strategy: str,
    allow_partial: bool,
    end_on: MessageTypeSpec | None,
    start_on: MessageTypeSpec | None,
    include_system: bool,
    text_splitter: Any,
    keep_tool_pairs: bool,
) -> tuple[list[Any], _Kept, _Body, frozenset[int]]:
    """:func:`_selection` of a list, its arguments checked."""
    split = _splitter(text_splitter) if allow_partial else _split_lines
    ends = _TypeMatch("end_on", end_on) if end_on else None
    starts = _TypeMatch("start_on", start_on) if start_on else None
    views = _Views(items)
    sizer = _Sizer(items, views, token_counter)
    if strategy == "first":
        head, run, part = _first(items, sizer, max_tokens, allow_partial, split)
    else:
        head, run, part = _last(
            items, views, sizer, max_tokens, allow_partial, split, include_system, ends
        )
    if part is None:  # whole messages only: the run is trimmed and checked as indices
        lo, hi = run.start, run.stop
        if ends is not None:  # a no-op for "last"
            while hi > lo and not ends(items[hi - 1], views[hi - 1]):
                hi -= 1
        if starts is not None:
            while lo < hi and not starts(items[lo], views[lo]):
                lo += 1
        if not keep_tool_pairs or lo == hi:
            return items, head, range(lo, hi), frozenset()
        linking = sizer.linking(lo, hi)  # the run was read by back(), or by _first
        parents, results = link_calls(views, lo, hi, results=True, linking=linking)
        units = _units_around(views, len(items), lo, hi, sizer.groups(lo, hi))
        if _closed(lo, hi, parents, results, units):
            return items, head, range(lo, hi), frozenset()
        return items, head, _drop_all(
            list(zip(range(lo, hi), items[lo:hi], strict=True)), views, {}, parents,
            results, units, ends, starts,
        ), frozenset()
    at, copy = part
    copies: _Copies = {at: read_message(copy, at)}
    entries = list(zip(run, items[run.start : run.stop], strict=True))
    body = [part, *entries] if at < run.start else [*entries, part]
    if keep_tool_pairs:
        # A partial piece of only whitespace is an empty message to a provider: drop it.
        body = [(i, m) for i, m in body if i not in copies or not _is_blank(m, i)]
    body = _trim_ends(body, views, copies, ends, starts)
    if keep_tool_pairs and body:
        # ``body`` is one contiguous run of the input: links are read around it only.
        parents, results = link_calls(views, body[0][0], body[-1][0] + 1, results=True)
        units = _units_around(views, len(items), body[0][0], body[-1][0] + 1)
        body = _drop_all(body, views, copies, parents, results, units, ends, starts)
    partial = frozenset(i for i, _ in body if i in copies)
    return items, head, body, partial


def _trim_ends(
    kept: _Kept, views: _Views, copies: _Copies, ends: _TypeMatch | None,
    starts: _TypeMatch | None,
) -> _Kept:
    """``kept`` less the trailing messages before one ``end_on`` matches and the leading
    ones before one ``start_on`` matches."""
    def is_a(match: _TypeMatch, entry: tuple[int, Any]) -> bool:
        return match(entry[1], copies.get(entry[0]) or views[entry[0]])

    stop = len(kept)
    if ends is not None:  # a no-op for "last" until tool pairs are dropped
        while stop and not is_a(ends, kept[stop - 1]):
            stop -= 1
    start = 0
    if starts is not None:
        while start < stop and not is_a(starts, kept[start]):
            start += 1
    return kept[start:stop]


def _drop_all(
    body: _Kept, views: _Views, copies: _Copies, parents: Parents, results: Results,
    units: tuple[tuple[int, int], ...], ends: _TypeMatch | None, starts: _TypeMatch | None,
) -> _Kept:
    """:func:`_drop_split_pairs` then :func:`_trim_ends`, until neither drops a message."""
    while True:
        size = len(body)
        body = _drop_split_pairs(body, views, parents, results, copies, units)
        body = _trim_ends(body, views, copies, ends, starts)
        if len(body) == size:
            return body


def _is_blank(message: Any, index: int) -> bool:
    """No visible text, no media, no tool call or result: nothing a provider accepts."""
    view = read_message(message, index)
    if view.calls or view.answers:
        return False
    return all(kind == BLANK_PART for kind in content_kinds(message, index))


def _first(
    items: list[Any],
    sizer: _Sizer,
    budget: float,
    allow_partial: bool,
    split: Callable[[str], list[str]],
) -> tuple[_Kept, range, tuple[int, Any] | None]:
    """Longest prefix that fits, plus a partial next message: ``(head, run, part)``."""
    n = len(items)
    if sizer.per_message is not None:
        used: float = 0
        k = 0
        while k < n:
            cost = sizer.one(k)
            if used + cost > budget:
                break
            used += cost
            k += 1
        per_message = sizer.per_message

        def fits(candidate: Any) -> bool:
            return used + per_message(candidate) <= budget
    else:
        k = max(0, _largest(lambda k: sizer.cost(items[:k]) <= budget, 1, n))

        def fits(candidate: Any) -> bool:
            return sizer.cost([*items[:k], candidate]) <= budget

    if allow_partial and k < n:
        part = _partial(items[k], fits, split, keep_end=False)
        if part is not None:
            return [], range(k), (k, part)
    return [], range(k), None


def _last(
    items: list[Any],
    views: _Views,
    sizer: _Sizer,
    budget: float,
    allow_partial: bool,
    split: Callable[[str], list[str]],
    include_system: bool,
    ends: _TypeMatch | None,
) -> tuple[_Kept, range, tuple[int, Any] | None]:
    """Longest suffix that fits (after ``end_on`` and the system message), plus a partial:
    ``(head, run, part)``."""
    stop = len(items)
    if ends is not None:
        while stop and not ends(items[stop - 1], views[stop - 1]):
            stop -= 1
    head: _Kept = []
    if include_system and stop and views[0].role == SYSTEM:
        head = [(0, items[0])]
    first = len(head)
    if sizer.per_message is not None:
        lo, used = sizer.back(stop, first, sum(sizer.one(i) for i, _ in head), budget)
        per_message = sizer.per_message

        def fits(candidate: Any) -> bool:
            return used + per_message(candidate) <= budget
    else:
        fixed = [m for _, m in head]
        k = _largest(
            lambda k: sizer.cost([*fixed, *items[stop - k : stop]]) <= budget, 1, stop - first
        )
        lo = stop - max(0, k)

        def fits(candidate: Any) -> bool:
            return sizer.cost([*fixed, candidate, *items[lo:stop]]) <= budget

    if allow_partial and lo > first:
        part = _partial(items[lo - 1], fits, split, keep_end=True)
        if part is not None:
            return head, range(lo, stop), (lo - 1, part)
    return head, range(lo, stop), None
