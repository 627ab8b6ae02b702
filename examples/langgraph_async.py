"""Async: ainvoke with AsyncSqliteSaver; store_hook awaits an AsyncSqliteStore through areduce."""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.sqlite.aio import AsyncSqliteStore

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import ReducingSaver, store_hook


async def reply(state: MessagesState) -> dict[str, list[AIMessage]]:
    # Stands in for `await model.ainvoke(state["messages"])`.
    return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}


async def main() -> None:
    async with (
        AsyncSqliteSaver.from_conn_string(":memory:") as checkpoints,
        AsyncSqliteStore.from_conn_string(":memory:") as store,
    ):
        await store.setup()
        reducer = MessageReducer(
            config=ReducerConfig(
                min_messages=2, max_messages=4, preserve_first=False, on_prune=[store_hook(store)]
            )
        )
        builder = StateGraph(MessagesState)
        builder.add_node("reply", reply)
        builder.add_edge(START, "reply")
        # aput runs `await reducer.areduce(...)`, which awaits the async store's writes.
        graph = builder.compile(checkpointer=ReducingSaver(checkpoints, reducer))

        config = {"configurable": {"thread_id": "t-1"}}
        for turn in range(4):
            await graph.ainvoke({"messages": [("user", f"hello {turn}")]}, config)
            state = await graph.aget_state(config)
            print(f"turn {turn}: stored {len(state.values['messages'])} messages")
        remembered = await store.asearch(("memories", "t-1"), limit=100)
        print("remembered:", sorted(item.value["content"] for item in remembered))


if __name__ == "__main__":
    asyncio.run(main())
