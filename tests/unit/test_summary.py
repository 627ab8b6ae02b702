"""Summaries: the injected-message marker, the default block and its ids, the built-in
summariser, rolling folds, failing closed, the summary's room in the budget, pins."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, messages_to_dict

from agentstate_reducer import (
    ConfigError,
    MessageReducer,
    ReducerConfig,
    Summarizer,
    default_summary_messages_factory,
    summarize_with,
    validate_history,
)
from agentstate_reducer.plan import PINNED, make_plan
from agentstate_reducer.read import (
    INJECTED_KEY,
    SUMMARY_ACK_KIND,
    SUMMARY_KIND,
    injected_kind,
    is_injected,
    is_summary,
    read_messages,
    summary_covers,
)
from agentstate_reducer.summary import SUMMARY_PROMPT, match_shape, summary_key
from agentstate_reducer.tokens import approximate_token_count

FACT = re.compile(r"FACT\[[^\]]*\]")


def chat(n: int, *, start: int = 0) -> list[dict[str, Any]]:
    """``n`` user/assistant messages; every user message states one fact."""
    out = []
    for i in range(start, start + n):
        if i % 2 == 0:
            out.append({"role": "user", "content": f"note FACT[{i}:id-{i * 7}]", "id": f"u{i}"})
        else:
            out.append({"role": "assistant", "content": f"noted {i}", "id": f"a{i}"})
    return out


def system() -> dict[str, Any]:
    return {"role": "system", "content": "sys", "id": "sys"}


class FactModel:
    """A duck-typed chat model: records each request, answers with every fact it saw."""

    def __init__(self, *, fail_on: set[int] = frozenset(), pad: int = 0) -> None:  # type: ignore[assignment]
        self.requests: list[list[dict[str, str]]] = []
        self.fail_on = fail_on
        self.pad = pad

    def invoke(self, request: list[dict[str, str]]) -> AIMessage:
        self.requests.append(request)
        if len(self.requests) in self.fail_on:
            raise RuntimeError("model down")
        facts = sorted(set(FACT.findall(request[-1]["content"])))
        body = "\n".join(f"- {f}" for f in facts) or "- nothing yet"
        return AIMessage(content="## Facts\n" + body + " filler" * self.pad)

    async def ainvoke(self, request: list[dict[str, str]]) -> AIMessage:
        return self.invoke(request)


# -- the marker ---------------------------------------------------------------------------


def test_injected_messages_are_recognised_by_metadata_in_every_shape() -> None:
    block = default_summary_messages_factory("text", 3, key="k")
    assert [injected_kind(m) for m in block] == [SUMMARY_KIND, SUMMARY_ACK_KIND]
    lc = match_shape(block, HumanMessage("x"))
    assert [type(m) for m in lc] == [HumanMessage, AIMessage]
    assert is_summary(lc[0]) and not is_summary(lc[1]) and is_injected(lc[1])
    assert lc[0].additional_kwargs[INJECTED_KEY]["kind"] == SUMMARY_KIND
    for shape in (messages_to_dict(lc), [dumpd(m) for m in lc]):
        assert [injected_kind(m) for m in shape] == [SUMMARY_KIND, SUMMARY_ACK_KIND]
    assert summary_covers(lc[0]) == 3 and summary_covers(lc[1]) == 0
    lc_dicts = match_shape(block, {"role": "human", "content": "x"})
    assert [m["role"] for m in lc_dicts] == ["human", "ai"] and is_summary(lc_dicts[0])
    typed = match_shape(block, {"type": "human", "content": "x"})
    assert [m["type"] for m in typed] == ["human", "ai"] and is_summary(typed[0])


def test_the_wording_alone_never_makes_a_summary() -> None:
    block = default_summary_messages_factory("text", 3, key="k")
    lookalike = {k: v for k, v in block[0].items() if k != INJECTED_KEY}
    assert not is_injected(lookalike)
    assert not is_injected(HumanMessage(block[0]["content"]))
    assert not is_injected({"role": "user", "content": "x", INJECTED_KEY: "summary"})
    assert not is_injected(
        {"role": "user", "content": "x", INJECTED_KEY: {"kind": "something else"}}
    )


def test_summary_ids_derive_from_the_pruned_ids() -> None:
    a, b = chat(4), chat(4, start=1)
    assert summary_key(a) == summary_key(list(a)) != summary_key(b)
    no_ids = [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]
    assert summary_key(no_ids) != summary_key(no_ids[::-1])


def test_the_same_reduce_twice_gives_the_same_output() -> None:
    config = ReducerConfig(
        min_messages=2, max_messages=4, summarize_fn=lambda p: "sum", inject_summary=True
    )
    history = [system(), *chat(6)]
    first = MessageReducer(config=config).reduce(history).surviving
    again = MessageReducer(config=config).reduce(history).surviving
    assert first == again
    assert first[1]["id"].startswith("summary-") and first[1]["id"] != first[2]["id"]
    other = MessageReducer(config=config).reduce([system(), *chat(6, start=1)]).surviving
    assert other[1]["id"] != first[1]["id"]


# -- rolling folds ---------------------------------------------------------------------


def fold_reducer(fn: Any, **options: Any) -> MessageReducer:
    settings_ = {"min_messages": 4, "max_messages": 8, **options}
    return MessageReducer(
        config=ReducerConfig(summarize_fn=fn, inject_summary=True, **settings_)
    )


def test_each_fold_gets_the_previous_summary_and_only_the_new_messages() -> None:
    model = FactModel()
    reducer = fold_reducer(summarize_with(model))
    state: list[Any] = [system()]
    for i in range(0, 60, 2):
        state = reducer.reduce(state, chat(2, start=i)).surviving
    assert len(model.requests) >= 8
    for n, request in enumerate(model.requests):
        system_part, user_part = request[0]["content"], request[1]["content"]
        assert "## Facts" in system_part and "verbatim" in system_part
        previous, new = user_part.split("<new_messages>")
        if n == 0:
            assert "(none yet)" in previous
        else:
            assert "Summary of the" in previous and FACT.search(previous)
        # Only the messages pruned this time: a bounded slice of the conversation.
        assert new.count("[user]") + new.count("[assistant]") <= 8
        assert "Summary of the" not in new and "[assistant] OK" not in new
    # Every fact ever stated is in the model's view: in the summary or in the tail.
    view = "\n".join(str(m["content"]) for m in state)
    assert {f"FACT[{i}:id-{i * 7}]" for i in range(0, 60, 2)} <= set(FACT.findall(view))
    assert sum(is_summary(m) for m in state) == 1


def test_the_summary_says_how_many_messages_it_stands_for() -> None:
    reducer = fold_reducer(summarize_with(FactModel()))
    state: list[Any] = [system()]
    for i in range(0, 40, 2):
        state = reducer.reduce(state, chat(2, start=i)).surviving
    summary = next(m for m in state if is_summary(m))
    conversation = [m for m in state[1:] if not is_injected(m)]
    assert summary_covers(summary) == 40 - len(conversation)
    assert summary["content"].startswith(f"Summary of the {summary_covers(summary)} earlier")


def test_a_summary_is_never_summarised_on_its_own() -> None:
    calls: list[list[Any]] = []

    def summarize(pruned: list[Any]) -> str:
        calls.append(pruned)
        return "sum"

    block = default_summary_messages_factory("earlier facts", 6, key="k")
    history = [system(), *block, *chat(3)]
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=3, max_messages=4, summarize_fn=summarize, inject_summary=True
        )
    )
    assert reducer.plan(history).pruned == (1, 2)  # the window covers only the summary
    result = reducer.reduce(history)
    assert result.surviving == history and result.pruned == [] and calls == []
    with pytest.raises(ValueError, match="nothing to summarise"):
        summarize_with(FactModel()).prompt(block)


# -- failing closed -------------------------------------------------------------------


def test_a_failing_summary_prunes_nothing_and_the_next_prune_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = FactModel(fail_on={2, 3})
    reducer = fold_reducer(summarize_with(model))
    state: list[Any] = [system()]
    lengths, failed = [], []
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        for i in range(0, 40, 2):
            result = reducer.reduce(state, chat(2, start=i))
            state = result.surviving
            lengths.append(len(state))
            failed.append(result.summary_failed)
            if result.summary_failed:
                assert result.pruned == [] and result.summary is None
    assert failed.count(True) == 2
    grown = failed.index(True)
    assert lengths[grown] > lengths[grown - 1]  # the window grew while the summary failed
    assert "kept the" in caplog.text and "retries" in caplog.text
    view = "\n".join(str(m["content"]) for m in state)
    assert {f"FACT[{i}:id-{i * 7}]" for i in range(0, 40, 2)} <= set(FACT.findall(view))


def test_a_model_raising_stopiteration_fails_the_summary_with_it() -> None:
    # Not its value as the summary (the fold's own end), nor PEP 479's RuntimeError.
    exhausted = StopIteration("no more replies")

    class Exhausted:
        def invoke(self, request: Any) -> Any:
            raise exhausted

    with pytest.raises(StopIteration) as raised:
        summarize_with(Exhausted())(chat(2))
    assert raised.value is exhausted


def test_count_mode_never_grows_past_twice_max_messages(caplog: pytest.LogCaptureFixture) -> None:
    model = FactModel(fail_on=set(range(2, 1000)))
    reducer = fold_reducer(summarize_with(model))
    state: list[Any] = [system()]
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        for i in range(0, 80, 2):
            state = reducer.reduce(state, chat(2, start=i)).surviving
            assert len(state) <= 2 * 8 + 1  # the preserved first adds one
    assert "without a summary" in caplog.text
    # The summary of the first fold is kept while later folds fail.
    assert sum(is_summary(m) for m in state) == 1


def test_token_mode_prunes_only_down_to_max_tokens_and_keeps_the_summary() -> None:
    model = FactModel(fail_on=set(range(3, 1000)))  # the first fold: an answer and a rewrite
    config = ReducerConfig(
        max_tokens=600,
        target_tokens=400,
        token_counter="approximate",
        summarize_fn=summarize_with(model, max_tokens=150),
        inject_summary=True,
    )
    reducer = MessageReducer(config=config)
    state: list[Any] = [system()]
    totals, failures = [], 0
    for i in range(0, 200, 2):
        result = reducer.reduce(state, chat(2, start=i))
        state = result.surviving
        failures += result.summary_failed
        totals.append(sum(map(approximate_token_count, state)))
    assert failures > 10
    assert max(totals) <= 600
    assert totals[-1] > 400  # failures prune to the hard limit, not to the target
    assert sum(is_summary(m) for m in state) == 1


def test_inject_summary_false_keeps_the_documented_behaviour() -> None:
    def boom(pruned: list[Any]) -> str:
        raise RuntimeError("down")

    config = ReducerConfig(min_messages=2, max_messages=4, summarize_fn=boom)
    result = MessageReducer(config=config).reduce([system(), *chat(6)])
    assert result.summary is None and result.summary_failed and len(result.pruned) == 4


def test_a_summary_returning_none_counts_as_failed() -> None:
    reducer = fold_reducer(lambda pruned: None)
    result = reducer.reduce([system(), *chat(10)])
    assert result.summary_failed and result.pruned == []


# -- the budget ----------------------------------------------------------------------


def test_the_summary_block_fits_the_budget_in_token_mode() -> None:
    model = FactModel(pad=40)
    config = ReducerConfig(
        max_tokens=400,
        target_tokens=300,
        token_counter="approximate",
        summarize_fn=summarize_with(model, max_tokens=120),
        inject_summary=True,
    )
    reducer = MessageReducer(config=config)
    state: list[Any] = [system()]
    for i in range(0, 200, 2):
        result = reducer.reduce(state, chat(2, start=i))
        state = result.surviving
        if result.pruned:
            assert sum(map(approximate_token_count, state)) <= 300
    assert model.requests and sum(is_summary(m) for m in state) == 1


def test_an_over_long_summary_is_rewritten_then_cut(caplog: pytest.LogCaptureFixture) -> None:
    prompts: list[str] = []

    def wordy(prompt: str) -> str:
        prompts.append(prompt)
        return "\n".join(f"- FACT[{i}] and many more words here" for i in range(200))

    summarize = summarize_with(wordy, max_tokens=50)
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        text = summarize(chat(4))
    assert len(prompts) == 2 and "the limit is 50" in prompts[1]
    assert 0 < approximate_token_count({"role": "user", "content": text}) <= 60
    assert text.startswith("- FACT[0]") and "cut to the cap" in caplog.text


# -- the built-in summariser --------------------------------------------------------------


def test_a_plain_callable_gets_the_whole_prompt_as_text() -> None:
    seen: list[str] = []

    def model(prompt: str) -> str:
        seen.append(prompt)
        return "## Facts\n- FACT[0:id-0]"

    assert summarize_with(model)(chat(2)) == "## Facts\n- FACT[0:id-0]"
    assert seen[0].startswith(SUMMARY_PROMPT.split("\n")[0])
    assert "[user] note FACT[0:id-0]" in seen[0] and "[assistant] noted 1" in seen[0]


def test_tool_calls_and_results_are_rendered_as_text() -> None:
    history = [
        {"role": "user", "content": "weather?", "id": "u"},
        {
            "role": "assistant",
            "content": None,
            "id": "a",
            "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "snow, -3 C", "id": "t"},
    ]
    prompt = summarize_with(FactModel()).prompt(history)
    assert '[assistant called weather({"city": "Oslo"})]' in prompt
    assert "[tool result] snow, -3 C" in prompt


def test_an_empty_answer_is_a_failure_never_the_summary() -> None:
    reducer = fold_reducer(summarize_with(lambda prompt: "  "))
    result = reducer.reduce([system(), *chat(10)])
    assert result.summary_failed and result.pruned == []


def test_a_slow_model_times_out_and_the_messages_stay() -> None:
    release = threading.Event()

    def slow(prompt: str) -> str:
        release.wait(5)
        return "late"

    reducer = fold_reducer(summarize_with(slow, timeout=0.05))
    try:
        result = reducer.reduce([system(), *chat(10)])
    finally:
        release.set()
    assert result.summary_failed and result.pruned == [] and len(result.surviving) == 11


def test_async_uses_ainvoke_and_times_out() -> None:
    class AsyncOnly:
        def __init__(self) -> None:
            self.calls = 0

        def invoke(self, request: Any) -> str:
            raise AssertionError("areduce must use ainvoke")

        async def ainvoke(self, request: Any) -> str:
            self.calls += 1
            return "## Facts\n- FACT[0:id-0]"

    model = AsyncOnly()
    result = asyncio.run(fold_reducer(summarize_with(model)).areduce([system(), *chat(10)]))
    assert model.calls == 1 and "FACT[0:id-0]" in result.surviving[1]["content"]

    async def slow(prompt: str) -> str:
        await asyncio.sleep(5)
        return "late"

    reducer = fold_reducer(summarize_with(slow, timeout=0.05))
    result = asyncio.run(reducer.areduce([system(), *chat(10)]))
    assert result.summary_failed and result.pruned == []
    with pytest.raises(TypeError, match="areduce"):
        reducer.reduce([system(), *chat(10)])


def test_a_langchain_chat_model_works_sync_and_async() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage("s1"), AIMessage("s2")]))
    history = [SystemMessage("sys")] + [
        (HumanMessage if i % 2 == 0 else AIMessage)(f"m{i}", id=f"m{i}") for i in range(10)
    ]
    reducer = fold_reducer(summarize_with(model))
    block = reducer.reduce(history).surviving[1:3]
    assert isinstance(block[0], HumanMessage) and block[0].content.endswith("s1")
    assert is_summary(block[0])
    again = asyncio.run(reducer.areduce(history)).surviving[1]
    assert again == block[0]  # the same fold: the same summary, from the one call
    later = asyncio.run(reducer.areduce([*history, HumanMessage("more", id="x")])).surviving[1]
    assert later.content.endswith("s2") and later.id != block[0].id


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"model": 3}, "model"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"timeout": -1}, "timeout"),
        ({"instructions": " "}, "instructions"),
    ],
)
def test_summarize_with_names_a_bad_argument(kwargs: dict[str, Any], name: str) -> None:
    model = kwargs.pop("model", FactModel())
    with pytest.raises(ConfigError, match=name):
        summarize_with(model, **kwargs)


def test_summarizer_is_exported_and_repr_names_the_model() -> None:
    fn = summarize_with(FactModel(), max_tokens=99)
    assert isinstance(fn, Summarizer) and "max_tokens=99" in repr(fn)


def test_summarize_with_takes_the_parameters_of_summarizer_with_their_defaults() -> None:
    """Both signatures are public and written out: this keeps them one list."""
    assert inspect.signature(summarize_with).parameters == inspect.signature(Summarizer).parameters


# -- pins --------------------------------------------------------------------------------


def test_pinned_messages_are_never_pruned_by_predicate_or_ids() -> None:
    history = [system(), *chat(30)]
    by_id = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, pin={"u0", "u10"}))
    kept = [m["id"] for m in by_id.reduce(history).surviving]
    assert kept[:3] == ["sys", "u0", "u10"] and len(kept) == 3 + 4

    def brief(message: Any) -> bool:
        return "FACT[2:" in str(message.get("content"))

    by_fn = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, pin=brief))
    assert [m["id"] for m in by_fn.reduce(history).surviving][:2] == ["sys", "u2"]
    plan = by_fn.plan(history)
    assert plan.reason(3) == (PINNED, None)


def test_a_pinned_tool_result_keeps_its_call_and_the_call_its_results() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        system(),
        {"role": "user", "content": "q", "id": "u"},
        {"role": "assistant", "content": None, "tool_calls": [call], "id": "a"},
        {"role": "tool", "tool_call_id": "c1", "content": "the brief", "id": "t"},
        *chat(20),
    ]
    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, pin={"t"}))
    surviving = reducer.reduce(history).surviving
    assert [m["id"] for m in surviving[:3]] == ["sys", "a", "t"]
    assert validate_history(surviving) == []


def test_pinned_tokens_are_budgeted_like_the_first_message() -> None:
    big = {"role": "user", "content": "brief " * 200, "id": "brief"}
    history = [system(), big, *chat(40)]
    config = ReducerConfig(
        max_tokens=400, target_tokens=300, token_counter="approximate", pin={"brief"}
    )
    surviving = MessageReducer(config=config).reduce(history).surviving
    assert surviving[1] is big
    assert sum(map(approximate_token_count, surviving)) <= 300


def test_pins_are_asked_only_once_the_threshold_is_passed() -> None:
    asked: list[Any] = []

    def pin(message: Any) -> bool:
        asked.append(message)
        return False

    reducer = MessageReducer(config=ReducerConfig(min_messages=4, max_messages=8, pin=pin))
    reducer.reduce([system(), *chat(6)])
    assert asked == []
    reducer.reduce([system(), *chat(12)])
    assert len(asked) == 13


@pytest.mark.parametrize("pin", ["u1", 3, [1, 2], {"u1": True}, b"x"])
def test_a_bad_pin_names_the_field(pin: Any) -> None:
    with pytest.raises(ConfigError, match="pin"):
        ReducerConfig(pin=pin)


def test_a_pin_set_is_frozen() -> None:
    assert ReducerConfig(pin=["a", "b"]).pin == frozenset({"a", "b"})


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 40),
    least=st.integers(0, 6),
    extra=st.integers(0, 6),
    pins=st.sets(st.integers(0, 39), max_size=6),
    tokens=st.booleans(),
)
def test_pins_survive_every_plan(
    n: int, least: int, extra: int, pins: set[int], tokens: bool
) -> None:
    history = [system(), *chat(n)]
    pinned = {i for i in pins if i <= n}
    if tokens:
        config = ReducerConfig(max_tokens=20 + 10 * extra, token_counter="approximate")
        counts = [approximate_token_count(m) for m in history]
    else:
        config = ReducerConfig(min_messages=least, max_messages=least + extra)
        counts = None
    plan = make_plan(read_messages(history), config, counts, pinned=pinned)
    assert not pinned & set(plan.pruned)
    assert validate_history([m for i, m in enumerate(history) if i not in plan.pruned]) == []


def test_the_same_fold_twice_costs_one_model_call() -> None:
    model = FactModel()
    summarize = summarize_with(model)
    assert summarize(chat(4)) == summarize(chat(4))
    assert len(model.requests) == 1
    asyncio.run(summarize.acall(chat(4)))
    assert len(model.requests) == 1
    summarize(chat(4, start=1))
    assert len(model.requests) == 2


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.integers(1, 4), min_size=3, max_size=25),
    least=st.integers(2, 6),
    extra=st.integers(1, 8),
    fail=st.sets(st.integers(1, 30), max_size=10),
)
def test_rolling_folds_keep_one_summary_the_pin_and_every_fact(
    steps: list[int], least: int, extra: int, fail: set[int]
) -> None:
    most = least + extra
    reducer = fold_reducer(
        summarize_with(FactModel(fail_on=fail), max_tokens=4000),
        min_messages=least,
        max_messages=most,
        pin={"u0"},
    )
    state: list[Any] = [system()]
    stated: set[str] = set()
    forced = False
    start = 0
    for n in steps:
        new = chat(n, start=start)
        start += n
        stated |= {f for m in new for f in FACT.findall(m["content"])}
        result = reducer.reduce(state, new)
        forced |= result.summary_failed and bool(result.pruned)
        state = result.surviving
        assert sum(is_summary(m) for m in state) <= 1
        assert state[0]["id"] == "sys" and any(m["id"] == "u0" for m in state)
        assert len(state) <= 2 * most + 1 + 1  # the bound, the preserved first, the pin
        assert validate_history(state) == []
        if not forced:  # a forced prune (the bound passed while failing) may lose facts
            view = "\n".join(str(m["content"]) for m in state)
            assert stated <= set(FACT.findall(view))
