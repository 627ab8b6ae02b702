"""TextMemo: a text's count remembered by the text, never a different count; memory bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentstate_reducer.tokens import approximate_text_tokens
from agentstate_reducer.tokens.heuristic import _HEURISTICS, _approximate_o200k
from agentstate_reducer.tokens.memo import TextMemo


@given(st.lists(st.text(max_size=80), max_size=30))
def test_a_memo_counts_as_the_counter_does(texts: list[str]) -> None:
    memo = TextMemo(_HEURISTICS["o200k_base"], shortest=8, entries=10)
    for text in [*texts, *texts]:
        assert memo(text) == _HEURISTICS["o200k_base"](text)


def test_a_text_seen_again_is_not_counted_again() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    memo = TextMemo(count, shortest=4)
    long = "a long enough text"
    assert memo(long) == memo("a long enough " + "text") == len(long)  # equal, not identical
    assert calls == [long] and memo.counted == 1
    assert memo("abc") == memo("abc") == 3 and calls.count("abc") == 2  # short: each time
    memo.forget()
    memo(long)
    assert memo.counted == 2


def test_a_memo_forgets_the_oldest_quarter_past_its_size() -> None:
    memo = TextMemo(len, entries=8)
    for i in range(9):
        memo(f"text number {i}")
    assert len(memo.known) == 7  # 9 entries, the oldest 2 (a quarter) gone
    assert "text number 0" not in memo.known
    assert "text number 8" in memo.known


def test_a_memo_forgets_the_oldest_past_the_characters_it_may_hold() -> None:
    memo = TextMemo(len, chars=100)
    for i in range(9):
        memo(f"text {i} " + "x" * 13)  # 20 characters each
    # The sixth and the ninth went past 100 characters: each time the oldest went until
    # at most 75 were held.
    assert list(memo.known) == [f"text {i} " + "x" * 13 for i in range(6, 9)]
    memo("y" * 26)  # more than a quarter of what it may hold: counted, not remembered
    assert "y" * 26 not in memo.known and memo("y" * 26) == 26
    memo.forget()
    assert not memo.known
    for i in range(5):
        memo(f"text {i} " + "x" * 13)
    assert len(memo.known) == 5  # forgetting emptied the characters held too


def test_a_str_subclass_is_counted_not_remembered() -> None:
    class Text(str):
        def __hash__(self) -> int:
            return 1

    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)

    memo = TextMemo(count)
    assert memo(Text("some text")) == memo(Text("some text")) == 9
    assert len(calls) == 2 and not memo.known
    assert memo("some text") == memo(Text("some text")) == 9  # its own hash: a miss
    assert len(calls) == 4 and list(memo.known) == ["some text"]


def test_the_heuristic_remembers_the_texts_it_counted() -> None:
    text = "a message the agent sees on every call, " * 4
    approximate_text_tokens(text)
    before = _approximate_o200k.counted
    assert approximate_text_tokens("".join(text)) == approximate_text_tokens(text[:] + "")
    assert _approximate_o200k.counted == before


def test_an_empty_text_is_the_counters_own_answer() -> None:
    # approximate_text_tokens answered 0 for any falsy text before the memo.
    assert approximate_text_tokens("") == 0
    assert approximate_text_tokens(None) == 0  # type: ignore[arg-type]


def test_the_heuristic_remembers_short_texts_too() -> None:
    # A tool name or a call id costs about five look-ups to estimate.
    approximate_text_tokens("call_" + "7f3a")
    before = _approximate_o200k.counted
    assert approximate_text_tokens("call_7f3a") == _HEURISTICS["o200k_base"]("call_7f3a")
    assert _approximate_o200k.counted == before
