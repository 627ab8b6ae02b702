"""A LangGraph agent as users run one: the reducer's share of a turn's CPU.

A ``StateGraph`` (an agent node, a ``ToolNode``) whose messages channel is
``reducing_add_messages(reducer)``, checkpointed by ``SqliteSaver`` on an in-memory
database, driven for ``turns`` turns by a scripted model: about 40% of questions call a
tool, then it answers; every ai message reports the input tokens of its request
(``usage_metadata``, 1.1x the cheap count of the history it saw). Each turn is one
``graph.invoke`` of a new question, so each starts from the checkpoint's deserialised
copies. Reports the CPU of the turns (the process's, every thread) and of the
reducer inside them (the CPU of the thread running it).

    python bench/graph.py [TURNS]
"""

from __future__ import annotations

import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import cheap_counter


def run(
    turns: int = 500, max_tokens: int = 24_000, recipe: bool = False, compare: bool = True
) -> dict[str, float]:
    """CPU microseconds of all turns and of the reducer within them, and its share;
    ``recipe``: the agent recipe (``agent_config()``), as the integrations default to.

    ``compare=False`` is a measurement, not a mode: the reducer takes every list whose
    length fits a remembered one for it, unchanged, without comparing a message (it sees
    no copy that differs and no edit in place), which shows what its comparisons cost.
    This graph edits nothing in place and its checkpointer's copies are equal, so its
    results are the same."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode
    from typing_extensions import TypedDict

    from agentstate_reducer import MessageReducer, ReducerConfig, agent_config
    from agentstate_reducer.langgraph import reducing_add_messages

    if not compare:
        from agentstate_reducer.reducing import chains, memory

        def fits(seen: list[Any], chain: Any, start: int = 0) -> bool:
            return start + len(seen) <= len(chain.prints)

        saved = chains._unchanged, memory._unchanged
        chains._unchanged = memory._unchanged = fits
        try:
            return run(turns, max_tokens, recipe)
        finally:
            chains._unchanged, memory._unchanged = saved
    build = agent_config if recipe else ReducerConfig
    reducer = MessageReducer(config=build(
        max_tokens=max_tokens, target_tokens=max_tokens * 3 // 4, token_counter="approximate"))
    merge = reducing_add_messages(reducer)
    spent = [0.0]

    def timed(left: Any = None, right: Any = None, **options: Any) -> Any:
        # The CPU of this thread: a checkpoint LangGraph writes meanwhile in another
        # (durability "async") is the turn's, not the reducer's.
        t0 = time.thread_time()
        try:
            return merge(left, right, **options)
        finally:
            spent[0] += time.thread_time() - t0

    # Built by call: with postponed annotations the class form would hide ``timed``.
    State = TypedDict("State", {"messages": Annotated[list[Any], timed]})  # noqa: UP013

    rng = random.Random(7)
    words = ("revenue", "grew", "costs", "flat", "team", "plans", "pricing", "latency",
             "errors", "region", "invoice", "refund", "schedule", "support")

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)) + "."

    @tool
    def search(q: str) -> str:
        """Search the knowledge base."""
        return text(rng.randint(40, 120))

    def agent(state: Any) -> dict[str, Any]:
        history = state["messages"]
        usage = int(1.1 * sum(map(cheap_counter, history)))
        meta = {"input_tokens": usage, "output_tokens": 30, "total_tokens": usage + 30}
        last = history[-1]
        if last.type == "human" and rng.random() < 0.4:
            call = {"name": "search", "args": {"q": text(4)}, "id": f"call_{len(history)}"}
            return {"messages": [AIMessage("", tool_calls=[call], usage_metadata=meta)]}
        return {"messages": [AIMessage(text(rng.randint(15, 60)), usage_metadata=meta)]}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([search]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(conn))
    config = {"configurable": {"thread_id": "bench"}}
    total = 0.0
    kept = 0
    for _ in range(turns):
        question = HumanMessage(text(rng.randint(8, 30)))
        t0 = time.process_time()
        out = graph.invoke({"messages": [question]}, config)
        total += time.process_time() - t0
        kept = len(out["messages"])
    conn.close()
    return {"turn_us": total / turns * 1e6, "reducer_us": spent[0] / turns * 1e6,
            "share": spent[0] / total, "kept": kept}


if __name__ == "__main__":
    got = run(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
    print(f"turn: {got['turn_us'] / 1e3:.2f} ms CPU, reducer {got['reducer_us'] / 1e3:.2f} ms "
          f"({got['share']:.1%}), {got['kept']} messages kept at the end")
