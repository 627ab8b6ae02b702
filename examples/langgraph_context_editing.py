"""Context editing in a langchain agent: old tool results cleared, an oversized one offloaded
to the store and read back by the agent through `recall_tool`.

    python examples/langgraph_context_editing.py
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from agentstate_reducer import ClearToolResults, MessageReducer, Offload, ReducerConfig
from agentstate_reducer.langgraph import ReducingMiddleware, recall_tool, store_hook

store = InMemoryStore()
reducer = MessageReducer(config=ReducerConfig(
    max_tokens=2_000, target_tokens=1_500, token_counter="approximate", preserve_first=False,
    context_edits=[ClearToolResults(keep=2), Offload(above=1_000, head=100, tail=50)],
    on_prune=[store_hook(store)],   # pruned messages and edited originals land here
))


@tool
def report(day: int) -> str:
    """The day's report."""
    size = 2_000 if day == 3 else 60  # day 3 is huge
    return f"report {day}: " + " ".join(f"line{day}.{k}" for k in range(size))


read_original = recall_tool(store, reducer=reducer, page_chars=1_500)


class ScriptedAgent(BaseChatModel):
    """Stands in for your chat model: reports a day, reads a preview's original back."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedAgent:  # type: ignore[override]
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage):  # "summarise day N": fetch its report
            day = int(str(last.content).split()[-1])
            call = {"name": "report", "args": {"day": day}, "id": f"r{day}"}
            reply = AIMessage("", tool_calls=[call])
        elif str(last.content).startswith("[offloaded"):  # a preview: read the original
            handle = str(last.content).split("handle ")[1].split(";")[0]
            call = {"name": read_original.name, "args": {"handle": handle}, "id": "read"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("summarised")
        return ChatResult(generations=[ChatGeneration(message=reply)])


agent = create_agent(ScriptedAgent(), [report, read_original],
                     middleware=[ReducingMiddleware(reducer)], checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "t-1"}}
for day in range(6):
    result = agent.invoke({"messages": [("user", f"summarise day {day}")]}, config)

state = result["messages"]
cleared = [m for m in state if isinstance(m, ToolMessage) and m.content.startswith("[cleared")]
print(f"{len(state)} messages in state, {len(cleared)} results cleared")
print(cleared[0].content)
page = next(m for m in state if isinstance(m, ToolMessage) and m.tool_call_id == "read")
print(page.content.splitlines()[0])
originals = [i for i in store.search(("memories", "t-1")) if "edited" in i.value]
print("stored originals:", len(originals))
