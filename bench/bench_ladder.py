"""The turn ladder's cost: a reduce with it beside one without, and a turn it shrank.

Where nothing is over (the current turn fits the budget), the ladder must cost at most
1.2x a reduce without it, one-shot and per appended message. Where the current turn alone
outgrows the budget (20 steps of ~5,000-token results at 3,000 / 2,000), the figures of
the turn it shrank: tokens before and after, results and inputs cleared, steps dropped.

    python bench/bench_ladder.py            # prints the figures
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from conversations import history, messages  # noqa: E402


@dataclass(frozen=True)
class LadderSizes:
    one_shot: int = 10_000
    kept: int = 1_000
    steps: int = 200
    repeat: int = 5
    turn_steps: int = 20
    result_tokens: int = 5_000


SMOKE = LadderSizes(one_shot=300, kept=60, steps=5, repeat=1, turn_steps=6)


def _configs(kept: int) -> dict[str, Any]:
    from agentstate_reducer import agent_config

    budget = kept * workloads.TOKENS_PER_MESSAGE
    common = {"max_tokens": budget, "target_tokens": budget * 4 // 5,
              "token_counter": workloads.cheap_counter}
    return {"ladder": agent_config(**common), "no ladder": agent_config(turn_ladder=False,
                                                                          **common)}


def long_turn(steps: int, result_tokens: int) -> list[dict[str, Any]]:
    """Earlier turns, then one question whose turn runs ``steps`` tool calls."""
    out = history(40)
    if out[-1]["role"] != "assistant" or out[-1].get("tool_calls"):
        out.append({"role": "assistant", "content": "Done.", "id": "a-end"})
    out.append({"role": "user", "content": "Read every report and sum them up.", "id": "uq"})
    for k in range(steps):
        call = f"c{k}"
        out.append({"role": "assistant", "content": None, "id": f"ac{k}", "tool_calls": [{
            "id": call, "type": "function",
            "function": {"name": "read_report", "arguments": json.dumps({"page": k})}}]})
        out.append({"role": "tool", "tool_call_id": call, "id": f"t{k}",
                    "content": "revenue grew " * (result_tokens * 4 // 13)})
    return out


def _one_shot(n: int, repeat: int, best: Callable[..., list[float]]) -> dict[str, float]:
    from agentstate_reducer import MessageReducer

    msgs = history(n)
    configs = _configs(n // 10)
    fns = [lambda c=c: MessageReducer(config=c).reduce(msgs) for c in configs.values()]
    return dict(zip(configs, best(fns, repeat), strict=True))


def _append(kept: int, steps: int, cpu_us: Callable[..., float]) -> dict[str, float]:
    """Median CPU microseconds of one appended message, each config on its own reducer
    (``plain``: a ``ReducerConfig`` of the same budget, none of the agent options)."""
    import statistics

    from agentstate_reducer import MessageReducer, ReducerConfig

    configs = _configs(kept)
    budget = kept * workloads.TOKENS_PER_MESSAGE
    configs["plain"] = ReducerConfig(max_tokens=budget, target_tokens=budget * 4 // 5,
                                     token_counter=workloads.cheap_counter)
    reducers = {name: MessageReducer(config=c) for name, c in configs.items()}
    start = history(kept)
    lists = {name: r.reduce(start).surviving for name, r in reducers.items()}
    stream = messages(seed=7)
    times: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(steps):
        m = next(stream)
        for name, reducer in reducers.items():  # interleaved: load hits all alike
            box: list[Any] = []

            def step(r: Any = reducer, current: list[Any] = lists[name], m: Any = m,
                     box: list[Any] = box) -> None:
                box.append(r.reduce(current, [m]))

            times[name].append(cpu_us(step))
            lists[name] = box[0].surviving
    return {name: statistics.median(t) for name, t in times.items()}


def shrunk(sizes: LadderSizes, best: Callable[..., list[float]]) -> dict[str, Any]:
    from agentstate_reducer import MessageReducer, agent_config

    msgs = long_turn(sizes.turn_steps, sizes.result_tokens)
    config = agent_config(max_tokens=3_000, target_tokens=2_000,
                          token_counter=workloads.cheap_counter)
    plain = agent_config(max_tokens=3_000, target_tokens=2_000, turn_ladder=False,
                         token_counter=workloads.cheap_counter)
    result = MessageReducer(config=config).reduce(msgs)
    before = sum(workloads.cheap_counter(m) for m in msgs)
    us, plain_us = best([lambda: MessageReducer(config=config).reduce(msgs),
                         lambda: MessageReducer(config=plain).reduce(msgs)], sizes.repeat)
    latest = sum(workloads.cheap_counter(m) for m in msgs[-2:])
    return {"messages": len(msgs), "steps": sizes.turn_steps, "tokens_before": before,
            "tokens_after": result.tokens_after,
            "latest_step": latest, "results_cleared": result.turn_results_cleared,
            "inputs_cleared": result.turn_inputs_cleared,
            "steps_dropped": result.turn_steps_dropped, "over_budget": result.over_budget,
            "us": us, "plain_us": plain_us,
            "plain_tokens_after": MessageReducer(config=plain).reduce(msgs).tokens_after}


def figures(sizes: LadderSizes, best: Callable[..., list[float]],
            cpu_us: Callable[..., float]) -> dict[str, Any]:
    return {"one_shot": _one_shot(sizes.one_shot, sizes.repeat, best),
            "append": _append(sizes.kept, sizes.steps, cpu_us),
            "shrunk": shrunk(sizes, best)}


if __name__ == "__main__":
    from harness import best as _best
    from harness import cpu_us as _cpu_us

    smoke = "--smoke" in sys.argv
    print(json.dumps(figures(SMOKE if smoke else LadderSizes(), _best, _cpu_us), indent=2))
