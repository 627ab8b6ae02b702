"""Before each model call: a pre_model_hook for LangGraph's create_react_agent.

create_react_agent is deprecated in LangGraph 1.x in favour of langchain.agents'
create_agent (see langgraph_agent.py); the hook keeps existing agents bounded.
"""

from __future__ import annotations

import warnings

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.store.memory import InMemoryStore
from langgraph.warnings import LangGraphDeprecatedSinceV10

from agentstate_reducer import MessageReducer, agent_config
from agentstate_reducer.langgraph import reducing_pre_model_hook, store_hook


def main() -> None:
    store = InMemoryStore()
    reducer = MessageReducer(
        config=agent_config(
            min_messages=4, max_messages=8, preserve_first=False, on_prune=[store_hook(store)]
        )
    )
    # Use your own chat model here; this one replies from a script.
    model = GenericFakeChatModel(messages=iter(AIMessage(f"answer {i}") for i in range(100)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
        agent = create_react_agent(
            model,
            tools=[],
            prompt="You are terse.",
            pre_model_hook=reducing_pre_model_hook(reducer),
            checkpointer=InMemorySaver(),
        )
    config = {"configurable": {"thread_id": "t-1"}}  # namespace: ("memories", "t-1")
    for turn in range(8):
        result = agent.invoke({"messages": [("user", f"question {turn}")]}, config)
        print(f"turn {turn}: {len(result['messages'])} messages in state")
    print("remembered:", len(store.search(("memories", "t-1"), limit=100)))


if __name__ == "__main__":
    main()
