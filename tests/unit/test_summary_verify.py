"""Summary verification (issue 25 item 3): what a summary drops of the pruned block, and
what it invents, is reported on ReducerResult; ``summarize_with(..., verify=True)``
asks once more naming it, then fails closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentstate_reducer import MessageReducer, ReducerConfig, summarize_with
from agentstate_reducer.summary import SummaryCheck, check_summary


def history() -> list[Any]:
    return [
        {"role": "system", "content": "You handle refunds.", "id": "s"},
        {"role": "user", "content": "Refund order A-1029, it was 250 EUR.", "id": "u1"},
        {
            "role": "assistant",
            "content": None,
            "id": "a1",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order": "A-1029"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "paid 2024-03-07, card x4411"},
        {"role": "assistant", "content": "Found it.", "id": "a2"},
        {"role": "user", "content": "thanks", "id": "u2"},
        {"role": "assistant", "content": "Anything else?", "id": "a3"},
        {"role": "user", "content": "no", "id": "u3"},
    ]


def test_check_summary_names_what_is_dropped_and_invented() -> None:
    pruned = history()[1:5]
    good = (
        "Refund of order A-1029 (250 EUR); lookup_order found it paid 2024-03-07 with "
        "card x4411."
    )
    assert check_summary(pruned, good) == SummaryCheck()
    assert not check_summary(pruned, good)
    bad = check_summary(pruned, "A refund of 250 EUR was checked with search_orders(A-1092).")
    assert set(bad.missing) == {"A-1029", "lookup_order", "2024-03-07", "x4411"}
    assert set(bad.invented) == {"search_orders", "A-1092"}


def test_a_previous_summarys_facts_must_be_kept_but_not_its_header() -> None:
    first = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            inject_summary=True,
            summarize_fn=lambda p: "Order A-1029, 250 EUR.",
        )
    ).reduce(history())
    block = [m for m in first.surviving if m["id"].startswith("summary-")]
    check = check_summary(block, "Nothing.")
    assert set(check.missing) == {"A-1029", "250"}  # never "Summary of the 5 ..."


@pytest.mark.parametrize("is_async", [False, True])
def test_a_reduce_reports_what_its_summary_drops(is_async: bool) -> None:
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            inject_summary=True,
            summarize_fn=lambda p: "The user asked for a refund; see refund_api.",
        )
    )
    result = asyncio.run(reducer.areduce(history())) if is_async else reducer.reduce(history())
    assert result.summary is not None and not result.summary_failed
    assert {"A-1029", "250", "lookup_order", "2024-03-07"} <= set(result.summary_missing)
    assert result.summary_invented == ("refund_api",)


class Model:
    """A summary model that forgets the order id until told, or forever."""

    def __init__(self, *, stubborn: bool = False) -> None:
        self.prompts: list[str] = []
        self.stubborn = stubborn

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        facts = "250 EUR, lookup_order, paid 2024-03-07, card x4411"
        if "Missing:" in prompt and not self.stubborn:
            return f"## Facts\n- order A-1029, {facts}"
        return f"## Facts\n- {facts}"


@pytest.mark.parametrize("is_async", [False, True])
def test_verify_retries_once_naming_what_is_missing(is_async: bool) -> None:
    model = Model()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            inject_summary=True,
            summarize_fn=summarize_with(model, verify=True),
        )
    )
    result = asyncio.run(reducer.areduce(history())) if is_async else reducer.reduce(history())
    assert len(model.prompts) == 2
    assert "Missing: A-1029" in model.prompts[1]
    assert result.summary is not None and "A-1029" in result.summary
    assert result.summary_missing == () and result.summary_invented == ()


def test_verify_fails_closed_when_the_retry_still_drops_a_fact() -> None:
    model = Model(stubborn=True)
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            inject_summary=True,
            summarize_fn=summarize_with(model, verify=True),
        )
    )
    result = reducer.reduce(history())
    assert len(model.prompts) == 2  # one retry, no more
    assert result.summary_failed and result.pruned == []


def test_without_verify_one_call_and_a_report() -> None:
    model = Model()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_messages=4, inject_summary=True, summarize_fn=summarize_with(model)
        )
    )
    result = reducer.reduce(history())
    assert len(model.prompts) == 1
    assert result.summary_missing == ("A-1029",)


def test_verify_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="verify"):
        summarize_with(str, verify="yes")  # type: ignore[arg-type]
