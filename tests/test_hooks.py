"""Background and the delivery ledger."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from agentstate_reducer import Background, MessageReducer, ReducerConfig
from agentstate_reducer.hooks import DeliveryLedger


def test_background_runs_off_the_callers_thread_with_a_copy() -> None:
    seen: list[tuple[list[Any], Any, str]] = []
    done = threading.Event()

    def hook(pruned: list[Any], ns: Any) -> None:
        seen.append((pruned, ns, threading.current_thread().name))
        done.set()

    with Background(hook, workers=1) as bg:
        batch = [{"role": "user", "content": "x"}]
        bg(batch, "ns")
        batch.clear()
        assert done.wait(5)
    pruned, ns, thread = seen[0]
    assert pruned == [{"role": "user", "content": "x"}]
    assert ns == "ns"
    assert thread != threading.current_thread().name


def test_background_drops_and_counts_when_the_backlog_is_full(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()
    started = threading.Event()

    def slow(pruned: list[Any], ns: Any) -> None:
        started.set()
        gate.wait(5)

    bg = Background(slow, workers=1, max_pending=2)
    bg([1], None)
    assert started.wait(5)  # the worker holds one job; two more fill the backlog
    bg([2], None)
    bg([3], None)
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        bg([4], None)
    assert bg.dropped == 1
    assert "backlog is full" in caplog.text
    gate.set()
    bg.close(wait=True)
    bg([5], None)
    assert bg.dropped == 2


def test_background_swallows_and_logs_hook_errors(caplog: pytest.LogCaptureFixture) -> None:
    def bad(pruned: list[Any], ns: Any) -> None:
        raise RuntimeError("store down")

    with caplog.at_level(logging.ERROR, logger="agentstate_reducer"), Background(bad) as bg:
        bg([1], None)
        bg.join()
    assert bg.failed == 1
    assert "background on_prune hook failed" in caplog.text


def test_background_close_drains_pending_work() -> None:
    got: list[int] = []
    bg = Background(lambda p, ns: got.extend(p), workers=2, max_pending=100)
    for i in range(50):
        bg([i], None)
    bg.close(wait=True)
    assert sorted(got) == list(range(50))


def test_background_runs_async_hooks() -> None:
    got: list[Any] = []

    async def remember(pruned: list[Any], ns: Any) -> None:
        await asyncio.sleep(0)
        got.append(ns)

    with Background(remember) as bg:
        bg([1], "a")
    assert got == ["a"]


def test_background_as_an_on_prune_hook() -> None:
    got: list[Any] = []
    with Background(lambda p, ns: got.extend(p)) as bg:
        reducer = MessageReducer(
            config=ReducerConfig(min_messages=1, max_messages=2, on_prune=[bg])
        )
        history = [{"role": "user", "content": str(i), "id": str(i)} for i in range(5)]
        result = reducer.reduce(existing=history)
    assert got == result.pruned


@pytest.mark.parametrize(
    ("kwargs", "word"), [({"workers": 0}, "workers"), ({"max_pending": 0}, "max_pending")]
)
def test_background_rejects_bad_sizes(kwargs: dict[str, int], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        Background(print, **kwargs)


def test_background_needs_a_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        Background(42)  # type: ignore[arg-type]


def test_ledger_claims_each_id_once_and_forgets_the_oldest() -> None:
    ledger = DeliveryLedger(window=2)
    a, b, c = ({"id": x, "role": "user"} for x in "abc")
    assert ledger.claim([a, b]) == [a, b]
    assert ledger.claim([a, b]) == []
    assert ledger.claim([c]) == [c]
    assert "a" not in ledger and "c" in ledger and len(ledger) == 2
    anonymous = {"role": "user"}
    assert ledger.claim([anonymous, anonymous]) == [anonymous, anonymous]


def test_ledger_release_hands_ids_out_again() -> None:
    ledger = DeliveryLedger(window=10)
    a, b = ({"id": x, "role": "user"} for x in "ab")
    ledger.claim([a, b])
    ledger.release([a, {"role": "user"}])
    assert "a" not in ledger and "b" in ledger
    assert ledger.claim([a, b]) == [a]


def test_background_drains_at_interpreter_exit(tmp_path: Any) -> None:
    import subprocess
    import sys
    import textwrap

    out = tmp_path / "delivered.txt"
    script = textwrap.dedent(
        f"""
        import time
        from agentstate_reducer import Background

        def slow(pruned, ns):
            time.sleep(0.01)
            with open({str(out)!r}, "a") as f:
                f.write(f"{{pruned[0]}}\\n")

        bg = Background(slow, workers=1)
        for i in range(20):
            bg([i], None)
        # no close(): the exit hook must drain the queue
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert sorted(int(x) for x in out.read_text().split()) == list(range(20))
