"""Background and the delivery ledger."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import textwrap
import threading
import time
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
    assert not ledger.delivered(a) and ledger.delivered(c) and len(ledger) == 2
    anonymous = {"role": "user", "content": "hi"}
    assert ledger.claim([anonymous, dict(anonymous)]) == [anonymous]


def test_ledger_keys_are_namespace_and_id() -> None:
    ledger = DeliveryLedger(window=100)
    one, text_one = {"id": 1, "role": "user"}, {"id": "1", "role": "user"}
    assert ledger.claim([one, text_one], ("memories", "t1")) == [one, text_one]
    assert ledger.claim([one, text_one], ["memories", "t1"]) == []  # a list is the same
    assert ledger.claim([one], ("memories", "t2")) == [one]
    assert ledger.claim([{"id": 1, "role": "user"}], None) == [one]
    assert ledger.delivered(one, ("memories", "t2")) and not ledger.delivered(one, "t3")


def test_ledger_release_hands_ids_out_again() -> None:
    ledger = DeliveryLedger(window=10)
    a, b = ({"id": x, "role": "user"} for x in "ab")
    ledger.claim([a, b], "ns")
    ledger.release([a, {"role": "user"}], "ns")
    assert not ledger.delivered(a, "ns") and ledger.delivered(b, "ns")
    assert ledger.claim([a, b], "ns") == [a]


def test_ledger_digests_unhashable_and_deep_messages() -> None:
    ledger = DeliveryLedger(window=10)
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    odd = {"role": "user", "content": deep}
    assert ledger.claim([odd], {"unhashable": "namespace"}) == [odd]
    assert ledger.claim([odd], {"unhashable": "namespace"}) == []


def test_background_releases_what_it_drops_so_a_later_reduce_delivers_it() -> None:
    """A flood: dropped batches are not marked delivered; a replay hands them over."""
    gate = threading.Event()
    got: list[str] = []

    def slow(pruned: list[Any], ns: Any) -> None:
        gate.wait(10)
        got.extend(m["id"] for m in pruned)

    bg = Background(slow, workers=1, max_pending=1)
    reducer = MessageReducer(config=ReducerConfig(min_messages=0, max_messages=0, on_prune=[bg]))
    sys_msg = {"role": "system", "content": "s"}
    steps = [[{"role": "user", "content": str(i), "id": f"m{i}"}] for i in range(50)]
    for new in steps:
        reducer.reduce(existing=[sys_msg], new=new)
    assert bg.dropped >= 40 and bg.dropped_messages == bg.dropped
    gate.set()
    bg.join()
    for new in steps:  # the replay (or the next reduce that prunes them)
        reducer.reduce(existing=[sys_msg], new=new)
        bg.join()
    bg.close()
    assert sorted(got) == sorted(f"m{i}" for i in range(50))
    assert len(got) == 50  # and none twice


def test_background_close_gives_up_after_its_timeout_and_counts() -> None:
    release = threading.Event()
    bg = Background(lambda p, ns: release.wait(30), workers=1, max_pending=10)
    for i in range(4):
        bg([i], None)
    t0 = time.monotonic()
    bg.close(wait=True, timeout=0.3)
    assert time.monotonic() - t0 < 5
    assert bg.abandoned == 4  # one running, three queued
    release.set()


@pytest.mark.slow
def test_background_exit_drain_is_bounded_and_ctrl_c_gives_up(tmp_path: Any) -> None:
    """A hung hook: the interpreter exits after exit_timeout, or at once on Ctrl-C."""
    script = textwrap.dedent(
        """
        import atexit, logging, signal, sys, threading, time
        # Ctrl-C as a terminal gives it: a run in the background (`make test &`, nohup)
        # ignores SIGINT, which the child inherits, and Python then installs no handler.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        logging.basicConfig(level=logging.WARNING)
        from agentstate_reducer import Background
        bg = Background(lambda p, ns: threading.Event().wait(), workers=1,
                        exit_timeout=float(sys.argv[1]))
        for i in range(3):
            bg([i], None)
        # Registered after bg, so run just before its drain (atexit: last in, first out).
        atexit.register(print, "draining", flush=True)
        print("ready", flush=True)
        """
    )
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", script, "0.5"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and time.monotonic() - t0 < 30
    assert "3 batch(es) abandoned" in out.stderr
    child = subprocess.Popen(
        [sys.executable, "-c", script, "600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        # Not before the drain began: a Ctrl-C then ends the script, and the drain waits.
        assert child.stdout.readline().strip() == "draining"
        time.sleep(0.5)  # inside the exit drain by now
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert "3 batch(es) abandoned" in err


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
