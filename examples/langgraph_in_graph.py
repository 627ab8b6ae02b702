"""In the graph: reducing_add_messages merges like add_messages, then prunes on every update."""

from __future__ import annotations

import uuid
from typing import Annotated

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import reducing_add_messages, store_hook

store = InMemoryStore()
reducer = MessageReducer(
    config=agent_config(min_messages=4, max_messages=8, on_prune=[store_hook(store)])
)


class State(TypedDict):
    # Channel reducers do not see the run config: name the namespace here.
    messages: Annotated[list[AnyMessage], reducing_add_messages(reducer, namespace="alice")]


@tool
def clock() -> str:
    """Tell the time."""
    return "noon"


def assistant(state: State) -> dict[str, list[AIMessage]]:
    # Stands in for a chat model: call the tool for each question, then answer.
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "clock", "args": {}, "id": f"call_{uuid.uuid4().hex[:8]}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"It is {last.content}.")]}


def main() -> None:
    builder = StateGraph(State)
    builder.add_node("assistant", assistant)
    builder.add_node("tools", ToolNode([clock]))
    builder.add_edge(START, "assistant")
    builder.add_conditional_edges("assistant", tools_condition)
    builder.add_edge("tools", "assistant")
    graph = builder.compile(checkpointer=InMemorySaver())

    config = {"configurable": {"thread_id": "t-1"}}
    for turn in range(6):
        new = [HumanMessage(content=f"What time is it? ({turn})")]
        if turn == 0:
            new.insert(0, SystemMessage(content="You tell the time."))  # kept: preserve_first
        result = graph.invoke({"messages": new}, config)
        kinds = " ".join(type(m).__name__.removesuffix("Message") for m in result["messages"])
        print(f"turn {turn}: {len(result['messages'])} messages [{kinds}]")
    print("remembered under ('alice',):", len(store.search(("alice",), limit=100)))


if __name__ == "__main__":
    main()
