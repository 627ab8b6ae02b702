"""Differential test: ``trim_messages(..., keep_tool_pairs=False)`` against langchain-core's.

Thousands of generated histories, each run through both implementations with the
parameter combinations cycled so that every combination is met many times, as
LangChain message objects and as OpenAI dicts. Where the two differ on purpose, a test
below asserts the difference (and ``docs/trim.md`` explains it).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from agentstate_reducer import trim_messages
from agentstate_reducer.tokens import approximate_token_count, resolve_token_counter

lc_messages = pytest.importorskip(
    "langchain_core.messages",
    reason='the differential test needs langchain-core: pip install "agentstate-reducer[dev]"',
)
AIMessage = lc_messages.AIMessage
BaseMessage = lc_messages.BaseMessage
ChatMessage = lc_messages.ChatMessage
HumanMessage = lc_messages.HumanMessage
SystemMessage = lc_messages.SystemMessage
ToolMessage = lc_messages.ToolMessage
convert_to_messages = lc_messages.convert_to_messages
lc_trim = lc_messages.trim_messages

HISTORIES = 2400
RUNS_PER_HISTORY = 3
CHUNKS = 4

# -- generated histories --------------------------------------------------------------

_WORDS = ("alpha", "beta", "gamma", "delta", "eps", "zeta")


def _text(rng: random.Random) -> str:
    lines = [
        " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 4)))
        for _ in range(rng.randint(1, 4))
    ]
    return "\n".join(lines) + ("\n" if rng.random() < 0.2 else "")


def _content(rng: random.Random) -> Any:
    if rng.random() < 0.6:
        return _text(rng)
    blocks: list[Any] = []
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.6:
            blocks.append({"type": "text", "text": _text(rng)})
        elif roll < 0.8:
            blocks.append({"type": "image_url", "image_url": {"url": "https://example/x.png"}})
        else:
            blocks.append(_text(rng))
    return blocks


def _history(rng: random.Random) -> list[dict[str, Any]]:
    """One history as OpenAI-style dicts, with ids; tool results mostly follow their call."""
    out: list[dict[str, Any]] = []
    if rng.random() < 0.6:
        out.append({"role": "system", "content": _text(rng), "id": "sys"})
    pending: list[str] = []
    for k in range(rng.randint(0, 12)):
        ident = f"m{k}"
        roll = rng.random()
        if pending and roll < 0.55:
            call = pending.pop(0)
            out.append({"role": "tool", "content": _text(rng), "tool_call_id": call, "id": ident})
        elif roll < 0.5:
            out.append({"role": "user", "content": _content(rng), "id": ident})
        elif roll < 0.7:
            out.append({"role": "assistant", "content": _content(rng), "id": ident})
        else:
            calls = [f"c{k}_{j}" for j in range(rng.randint(1, 2))]
            pending.extend(calls)
            out.append(
                {
                    "role": "assistant",
                    "content": _text(rng) if rng.random() < 0.5 else "",
                    "id": ident,
                    "tool_calls": [
                        {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                        for c in calls
                    ],
                }
            )
    return out


# -- counters that read both shapes the same way --------------------------------------


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


def chars(message: Any) -> int:
    """Characters of text, 7 per other block, 5 per tool call, 3 per message."""
    content = _field(message, "content")
    total = 3 + 5 * len(_field(message, "tool_calls") or ())
    if isinstance(content, str):
        return total + len(content)
    for block in content:
        if isinstance(block, str):
            total += len(block)
        elif block.get("type") == "text":
            total += len(block["text"])
        else:
            total += 7
    return total


def chars_per_message(message: BaseMessage | dict[str, Any]) -> int:
    return chars(message)


def chars_of_list(messages):  # type: ignore[no-untyped-def]  # unannotated: a list counter
    return sum(chars(m) for m in messages)


def _split3(text: str) -> list[str]:
    return [text[i : i + 3] for i in range(0, len(text), 3)]


def approximate_of_list(messages):  # type: ignore[no-untyped-def]  # unannotated: a list counter
    """This package's heuristic over a list, for LangChain: what ``"approximate"`` counts."""
    return sum(approximate_token_count(m) for m in messages)


COUNTERS: dict[str, tuple[Any, Callable[[list[Any]], Any]]] = {
    # name: (what ours gets, what LangChain gets)
    "per-message": (chars_per_message, chars_of_list),
    "list": (chars_of_list, chars_of_list),
    "len": (len, len),
    # The built-in counter, which reads and counts the kept messages in one loop.
    "approximate": ("approximate", approximate_of_list),
}
SPLITTERS: dict[str, Callable[[str], list[str]] | None] = {"lines": None, "3-chars": _split3}
SHAPES = ("objects", "dicts")
STARTS: tuple[Any, ...] = (None, "human", "ai", ["human", "system"], HumanMessage)
ENDS: tuple[Any, ...] = (None, "human", "ai", "tool", [AIMessage, "tool"])


def _combinations() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for partial, end_on in itertools.product((False, True), ENDS):
        out.append({"strategy": "first", "allow_partial": partial, "end_on": end_on})
    for partial, system, start_on, end_on in itertools.product(
        (False, True), (False, True), STARTS, ENDS
    ):
        out.append(
            {
                "strategy": "last",
                "allow_partial": partial,
                "include_system": system,
                "start_on": start_on,
                "end_on": end_on,
            }
        )
    return [
        {**params, "counter": counter, "splitter": splitter, "shape": shape}
        for params in out
        for counter in COUNTERS
        for splitter in SPLITTERS
        for shape in SHAPES
        # LangChain sizes a "last" partial on its pieces in reverse order ("azetma gam" for
        # "gamma zeta"), which only a counter blind to order (chars, len) counts alike.
        if not (counter == "approximate" and params["allow_partial"])
    ]


COMBINATIONS = _combinations()


def _to_objects(history: list[dict[str, Any]]) -> list[Any]:
    return list(convert_to_messages(history))


def _run(history: list[dict[str, Any]], case: dict[str, Any], budget: int) -> None:
    ours_counter, lc_counter = COUNTERS[case["counter"]]
    params = {
        k: v for k, v in case.items() if k not in ("counter", "splitter", "shape") and v is not None
    }
    splitter = SPLITTERS[case["splitter"]]
    if splitter is not None:
        params["text_splitter"] = splitter
    given = _to_objects(history) if case["shape"] == "objects" else history
    snapshot = repr(given)
    expected = lc_trim(given, max_tokens=budget, token_counter=lc_counter, **params)
    got = trim_messages(
        given, max_tokens=budget, token_counter=ours_counter, keep_tool_pairs=False, **params
    )
    assert repr(given) == snapshot, "the input was mutated"
    if case["shape"] == "dicts":
        assert all(isinstance(m, dict) for m in got)
        got = _to_objects(got)
    if got != expected and case["strategy"] == "last" and case.get("allow_partial"):
        _assert_only_the_partial_blocks_differ(_to_objects(history), got, expected)
        return
    assert got == expected, f"budget={budget} case={case}\nhistory={history}"


def _assert_only_the_partial_blocks_differ(
    originals: list[Any], got: list[Any], expected: list[Any]
) -> None:
    """The intentional difference: a ``"last"`` partial keeps leading blocks, as the docs show.

    LangChain keeps trailing blocks. Whole messages agree, except that where one side
    has a partial message and the other none, ``start_on`` may skip a few more leading
    messages on one side: one list of whole messages is a suffix of the other.
    """
    ours = [m for m in got if m in originals]
    theirs = [m for m in expected if m in originals]
    if ours and theirs and ours[0] == theirs[0] == originals[0]:  # include_system's head
        ours, theirs = ours[1:], theirs[1:]
    shorter, longer = sorted((ours, theirs), key=len)
    assert longer[len(longer) - len(shorter) :] == shorter
    by_id = {m.id: m for m in originals}
    partials = [m for m in got if m not in originals]
    assert len(partials) <= 1
    for part in partials:
        blocks = by_id[part.id].content
        assert isinstance(blocks, list)
        # Leading whole blocks, or (when none fits) trailing pieces of the last block's text.
        if isinstance(part.content, list):
            assert part.content == blocks[: len(part.content)]
        else:
            assert isinstance(part.content, str)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_differential_against_langchain(chunk: int) -> None:
    # In chunks, so that the workers of a parallel run share it; each chunk meets every
    # combination at least once, so the whole run meets each at least CHUNKS times.
    rng = random.Random(20240611 + chunk)
    met: dict[int, int] = {}
    per_chunk = HISTORIES // CHUNKS
    for h in range(chunk * per_chunk, (chunk + 1) * per_chunk):
        history = _history(rng)
        total = sum(chars(m) for m in history)
        for r in range(RUNS_PER_HISTORY):
            k = (h * RUNS_PER_HISTORY + r) % len(COMBINATIONS)
            case = COMBINATIONS[k]
            # Budgets lean high, so most runs keep something to compare.
            scale = {"len": len(history), "approximate": approximate_of_list(history)}.get(
                case["counter"], total
            )
            budget = round((scale + 2) * rng.random() ** 0.5)
            _run(history, case, budget)
            met[k] = met.get(k, 0) + 1
    assert len(met) == len(COMBINATIONS)


@pytest.mark.parametrize(
    "params",
    [
        {"strategy": "middle"},
        {"strategy": "first", "start_on": "human"},
        {"strategy": "first", "include_system": True},
        {"strategy": "first", "start_on": "human", "include_system": True},
        {"strategy": "middle", "start_on": "human"},
        {"token_counter": "exact"},
        {"token_counter": 42},
    ],
)
def test_errors_where_langchain_raises(params: dict[str, Any]) -> None:
    history = [SystemMessage("s"), HumanMessage("h")]
    kwargs: dict[str, Any] = {"max_tokens": 5, "token_counter": len, **params}
    with pytest.raises(ValueError):
        lc_trim(history, **kwargs)
    with pytest.raises(ValueError):
        trim_messages(history, **kwargs)
    with pytest.raises(ValueError):
        trim_messages([], **kwargs)


@pytest.mark.parametrize(
    "params",
    [
        {"strategy": "first", "start_on": []},
        {"strategy": "first", "include_system": False},
        {"strategy": "last", "text_splitter": _split3},
    ],
)
def test_no_error_where_langchain_accepts(params: dict[str, Any]) -> None:
    history = [SystemMessage("s"), HumanMessage("h")]
    kwargs: dict[str, Any] = {"max_tokens": 5, "token_counter": len, **params}
    assert trim_messages(history, **kwargs) == lc_trim(history, **kwargs)


# -- intentional differences, each asserted -------------------------------------------

_DIALOGUE = [
    SystemMessage("sys", id="s"),
    HumanMessage("hi", id="h1"),
    AIMessage("hello", id="a1"),
    HumanMessage("more", id="h2"),
    AIMessage("sure", id="a2"),
]


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("user", "human"), ("assistant", "ai"), ("AIMessage", "ai"), ("developer", "system")],
)
def test_difference_role_aliases_match(alias: str, canonical: str) -> None:
    """LangChain compares ``message.type`` with the string; we read aliases too."""
    ours = trim_messages(_DIALOGUE, max_tokens=99, token_counter=len, end_on=alias)
    assert ours == trim_messages(_DIALOGUE, max_tokens=99, token_counter=len, end_on=canonical)
    assert ours != []
    assert lc_trim(_DIALOGUE, max_tokens=99, token_counter=len, end_on=alias) == []


def test_difference_chat_message_matched_by_role() -> None:
    """``ChatMessage(role="user")`` is a human turn here; LangChain only knows type ``chat``."""
    history = [ChatMessage(role="user", content="q", id="c"), AIMessage("a", id="a")]
    assert trim_messages(history, max_tokens=99, token_counter=len, start_on="human") == history
    assert lc_trim(history, max_tokens=99, token_counter=len, start_on="human") == []


def test_difference_single_message_counter_under_postponed_annotations() -> None:
    """LangChain treats a counter as per-message only if annotated exactly ``BaseMessage``."""
    seen: list[type] = []

    def count(message: BaseMessage) -> int:  # a string annotation in this module
        seen.append(type(message))
        return 1

    assert trim_messages(_DIALOGUE, max_tokens=2, token_counter=count) == _DIALOGUE[-2:]
    assert list not in seen
    seen.clear()
    # LangChain hands it whole lists, each counted as 1: everything "fits".
    assert lc_trim(_DIALOGUE, max_tokens=2, token_counter=count) == _DIALOGUE
    assert list in seen


def _words(messages: list[Any]) -> int:
    return sum(len(_field(m, "content").split()) for m in messages)


def test_difference_last_partial_keeps_leading_blocks() -> None:
    """The seed page keeps a ``"last"`` partial's FIRST block; langchain_core its last."""
    first = {"type": "text", "text": "one two"}
    second = {"type": "text", "text": "three four"}
    history = [AIMessage([first, second], id="a"), HumanMessage("five six", id="h")]

    def words(messages):  # type: ignore[no-untyped-def]  # unannotated: a list counter
        total = 0
        for message in messages:
            content = message.content
            if isinstance(content, list):
                total += sum(len(b["text"].split()) for b in content if isinstance(b, dict))
            else:
                total += len(content.split())
        return total

    ours = trim_messages(history, max_tokens=4, token_counter=words, allow_partial=True)
    theirs = lc_trim(history, max_tokens=4, token_counter=words, allow_partial=True)
    assert ours == [AIMessage([first], id="a"), history[1]]
    assert theirs == [AIMessage([second], id="a"), history[1]]


def test_difference_last_partial_counts_the_text_it_keeps() -> None:
    """LangChain counts the kept pieces of a ``"last"`` partial joined in reverse order.

    With a counter that cares about order (words), its result can exceed the budget;
    ours counts the text it returns.
    """
    history = [AIMessage("aa\nbb\ncc", id="a"), HumanMessage("q", id="h")]
    ours = trim_messages(history, max_tokens=2, token_counter=_words, allow_partial=True)
    theirs = lc_trim(history, max_tokens=2, token_counter=_words, allow_partial=True)
    assert [m.content for m in ours] == ["cc", "q"]
    assert [m.content for m in theirs] == ["bb\ncc", "q"]
    assert _words(ours) <= 2 < _words(theirs)


def test_difference_approximate_is_this_packages_heuristic() -> None:
    """``"approximate"`` means ``tokens.py``'s counter, not ``count_tokens_approximately``."""
    rng = random.Random(7)
    per_message = resolve_token_counter("approximate")
    for _ in range(50):
        history = _to_objects(_history(rng))
        budget = rng.randint(0, 200)
        for strategy in ("first", "last"):
            ours = trim_messages(
                history,
                max_tokens=budget,
                token_counter="approximate",
                strategy=strategy,
                keep_tool_pairs=False,
            )
            theirs = lc_trim(
                history,
                max_tokens=budget,
                token_counter=lambda ms: sum(per_message(m) for m in ms),
                strategy=strategy,
            )
            assert ours == theirs


class _FakeModel:
    """A chat model whose list count adds 3 reply-priming tokens once per request."""

    def get_num_tokens_from_messages(self, messages: list[Any]) -> int:
        return 3 + 2 * len(messages)


def test_difference_chat_model_counts_each_message() -> None:
    """A chat model counts messages one by one here (so its per-request overhead repeats)."""
    ours = trim_messages(_DIALOGUE, max_tokens=10, token_counter=_FakeModel())
    theirs = lc_trim(_DIALOGUE, max_tokens=10, token_counter=_FakeModel())
    assert len(ours) == 2  # 5 tokens each
    assert len(theirs) == 3  # 3 + 2 per message


def test_difference_none_counter_is_the_default_counter() -> None:
    assert trim_messages(_DIALOGUE, max_tokens=10**6, token_counter=None) == _DIALOGUE
    with pytest.raises(ValueError):
        lc_trim(_DIALOGUE, max_tokens=10**6, token_counter=None)


def test_difference_list_counter_sees_candidates_in_order() -> None:
    """LangChain hands a list counter the ``"last"`` candidates reversed; we keep the order."""
    ours_seen: list[list[Any]] = []
    theirs_seen: list[list[Any]] = []

    def record(into: list[list[Any]]) -> Callable[[list[Any]], int]:
        def count(messages):  # type: ignore[no-untyped-def]
            into.append(list(messages))
            return len(messages)

        return count

    trim_messages(_DIALOGUE, max_tokens=3, token_counter=record(ours_seen))
    lc_trim(_DIALOGUE, max_tokens=3, token_counter=record(theirs_seen))
    order = {id(m): i for i, m in enumerate(_DIALOGUE)}
    assert all(
        [order[id(m)] for m in seen] == sorted(order[id(m)] for m in seen) for seen in ours_seen
    )
    assert any(
        [order[id(m)] for m in seen] != sorted(order[id(m)] for m in seen) for seen in theirs_seen
    )


def test_difference_list_counter_counts_the_system_message_with_the_rest() -> None:
    """With ``include_system``, a list counter sees ``[system, *kept]`` as one list.

    LangChain counts the system message alone and subtracts it, so a per-list overhead
    is charged twice; ours charges it once and keeps more.
    """

    def with_overhead(messages):  # type: ignore[no-untyped-def]
        return 2 + len(messages) if messages else 0

    ours = trim_messages(_DIALOGUE, max_tokens=5, token_counter=with_overhead, include_system=True)
    theirs = lc_trim(_DIALOGUE, max_tokens=5, token_counter=with_overhead, include_system=True)
    assert ours == [_DIALOGUE[0], *_DIALOGUE[-2:]]
    assert with_overhead(ours) == 5
    assert theirs == [_DIALOGUE[0]]
