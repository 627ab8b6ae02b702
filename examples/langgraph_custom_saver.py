"""Your own saver: apply_reducer returns a reduced copy of the checkpoint to store."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import apply_reducer, memory_namespace


class BoundedSaver(InMemorySaver):
    """An InMemorySaver that stores at most the reducer's window of messages."""

    def __init__(self, reducer: MessageReducer) -> None:
        super().__init__()
        self.reducer = reducer

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        checkpoint = apply_reducer(self.reducer, checkpoint, config)  # never mutates its input
        return super().put(config, checkpoint, metadata, new_versions)


def main() -> None:
    seen: list[Any] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2,
            max_messages=4,
            preserve_first=False,
            on_prune=[lambda pruned, namespace: seen.append((namespace, len(pruned)))],
        )
    )
    builder = StateGraph(MessagesState)
    builder.add_node("echo", lambda s: {"messages": [AIMessage(f"echo {len(s['messages'])}")]})
    builder.add_edge(START, "echo")
    graph = builder.compile(checkpointer=BoundedSaver(reducer))

    config: RunnableConfig = {"configurable": {"thread_id": "t-1"}}
    print("namespace for this run:", memory_namespace(reducer, config))
    for turn in range(4):
        graph.invoke({"messages": [("user", f"hello {turn}")]}, config)
        print(f"turn {turn}: stored {len(graph.get_state(config).values['messages'])} messages")
    print("hook calls (namespace, pruned):", seen)


if __name__ == "__main__":
    main()
