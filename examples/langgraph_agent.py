"""Before each model call: ReducingMiddleware for a langchain.agents agent."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import ReducingMiddleware, store_hook


def main() -> None:
    store = InMemoryStore()
    reducer = MessageReducer(
        config=agent_config(
            min_messages=4,
            max_messages=8,
            preserve_first=False,  # the system prompt is not in the state
            on_prune=[store_hook(store)],
        )
    )
    # Use your own chat model here; this one replies from a script.
    model = GenericFakeChatModel(messages=iter(AIMessage(f"answer {i}") for i in range(100)))
    agent = create_agent(
        model,
        tools=[],
        system_prompt="You are terse.",
        middleware=[ReducingMiddleware(reducer)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t-1", "memory_namespace": ("memories", "alice")}}
    for turn in range(8):
        result = agent.invoke({"messages": [("user", f"question {turn}")]}, config)
        print(f"turn {turn}: {len(result['messages'])} messages in state")
    print("remembered:", len(store.search(("memories", "alice"), limit=100)))


if __name__ == "__main__":
    main()
