"""At persistence: ReducingSaver keeps every checkpoint window-sized; pruned turns go to a store."""

from __future__ import annotations

import sqlite3
import uuid

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import ReducingSaver, store_hook


@tool
def clock() -> str:
    """Tell the time."""
    return "noon"


def assistant(state: MessagesState) -> dict[str, list[AIMessage]]:
    # Stands in for a chat model: call the tool for each question, then answer.
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "clock", "args": {}, "id": f"call_{uuid.uuid4().hex[:8]}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"It is {last.content}.")]}


def main() -> None:
    store = InMemoryStore()
    reducer = MessageReducer(
        config=agent_config(min_messages=4, max_messages=8, on_prune=[store_hook(store)])
    )
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    saver = ReducingSaver(SqliteSaver(conn), reducer)

    builder = StateGraph(MessagesState)
    builder.add_node("assistant", assistant)
    builder.add_node("tools", ToolNode([clock]))
    builder.add_edge(START, "assistant")
    builder.add_conditional_edges("assistant", tools_condition)
    builder.add_edge("tools", "assistant")
    graph = builder.compile(checkpointer=saver)

    # The namespace pruned messages go to; without it, ("memories", thread_id).
    config = {"configurable": {"thread_id": "t-1", "memory_namespace": ("memories", "alice")}}
    for turn in range(6):
        new = [HumanMessage(content=f"What time is it? ({turn})")]
        if turn == 0:
            new.insert(0, SystemMessage(content="You tell the time."))  # kept: preserve_first
        graph.invoke({"messages": new}, config)
        stored = graph.get_state(config).values["messages"]
        remembered = store.search(("memories", "alice"), limit=100)
        print(f"turn {turn}: checkpoint holds {len(stored)} messages, store {len(remembered)}")
    first = store.search(("memories", "alice"), limit=100)[0].value
    print("a remembered message:", {k: first[k] for k in ("role", "content", "tool_calls")})


if __name__ == "__main__":
    main()
