"""agentstate_reducer.agent_framework and the reader of Agent Framework messages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest
from agent_framework import Content, Message

from agentstate_reducer import MessageReducer, agent_config, validate_history
from agentstate_reducer.agent_framework import ReducingChatMiddleware
from agentstate_reducer.errors import ConfigTypeError
from agentstate_reducer.read import (
    INJECTED_KEY,
    content_kinds,
    is_injected,
    read_message,
    synthetic_results,
    with_parts,
)


def user(text: str) -> Message:
    return Message(role="user", contents=[Content.from_text(text)])


def step(k: int, size: int = 20) -> list[Message]:
    call = Content.from_function_call(call_id=f"c{k}", name="fetch", arguments={"page": k})
    result = Content.from_function_result(call_id=f"c{k}", result=f"page {k} " * size)
    return [Message(role="assistant", contents=[Content.from_text("next"), call]),
            Message(role="tool", contents=[result])]


def test_the_reader_reads_calls_results_and_parts() -> None:
    call, result = step(1)
    record = read_message(call)
    assert (record.role, record.calls, record.answers) == ("ai", ("c1",), ())
    assert record.tool_calls == (("fetch", {"page": 1}),)
    assert read_message(result).answers == ("c1",) and read_message(result).role == "tool"
    assert content_kinds(call) == ("text", "tool_use")
    reasoning = Message(role="assistant", contents=[Content.from_text_reasoning(text="hm")])
    assert content_kinds(reasoning) == ("reasoning",)


def test_an_edited_result_is_rebuilt_as_the_framework_writes_it() -> None:
    _, result = step(1)
    edited = with_parts(result, {("contents", 0, "result"): "[cleared]"})
    (content,) = edited.contents
    assert content.result == "[cleared]" and [i.text for i in content.items] == ["[cleared]"]
    assert content.call_id == "c1"
    assert result.contents[0].result.startswith("page 1")  # the original is untouched


def test_a_synthetic_result_is_a_tool_message() -> None:
    call, _ = step(1)
    (made,) = synthetic_results(call, ("c1",))
    assert isinstance(made, Message) and made.role == "tool"
    assert made.contents[0].type == "function_result" and made.contents[0].call_id == "c1"


async def test_the_middleware_repairs_an_abandoned_call_and_notes_a_dropped_step() -> None:
    got: list[Any] = []
    reducer = MessageReducer(config=agent_config(
        max_tokens=800, target_tokens=500, token_counter="approximate",
        on_prune=[lambda pruned, namespace: got.extend((namespace, m) for m in pruned)],
    ))
    middleware = ReducingChatMiddleware(reducer)
    dangling = Message(role="assistant", contents=[
        Content.from_function_call(call_id="dead", name="publish", arguments={})
    ])
    messages = [user("turn 0"), dangling, user("turn 1")]
    for k in range(12):
        messages += step(k, size=80)
    context = SimpleNamespace(messages=messages, options={"instructions": "Be brief."},
                              session=SimpleNamespace(session_id="s-1"))
    called: list[int] = []

    async def call_next() -> None:
        called.append(1)

    await middleware.process(context, call_next)  # type: ignore[arg-type]
    sent = context.messages
    assert called == [1] and sent is not messages
    assert validate_history(sent) == [] and validate_history(sent, provider="anthropic") == []
    notes = [m for m in sent if m.role == "user" and m.text.startswith("[turn note: ")]
    assert len(notes) == 1 and not is_injected(notes[0])  # the marker is not sent
    assert INJECTED_KEY not in notes[0].additional_properties
    assert got and {ns for ns, _ in got} == {("memories", "s-1")}


async def test_a_request_within_the_window_is_left_as_it_is() -> None:
    messages = [user("turn 0"), *step(0)]
    context = SimpleNamespace(messages=messages, options={}, session=None)

    async def call_next() -> None:
        return None

    await ReducingChatMiddleware().process(context, call_next)  # type: ignore[arg-type]
    assert context.messages is messages


def test_a_wrong_reducer_is_refused() -> None:
    assert ReducingChatMiddleware().reducer.config == agent_config()
    with pytest.raises(ConfigTypeError, match="MessageReducer"):
        ReducingChatMiddleware(3)  # type: ignore[arg-type]


def test_missing_agent_framework_names_the_extra() -> None:
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "agent_framework":
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        try:
            import agentstate_reducer.agent_framework
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert 'pip install "agentstate-reducer[agent-framework]"' in out.stdout


def test_tools_and_instructions_count_against_the_budget() -> None:
    """In token mode the request's tools and instructions are counted, once per change."""
    from agent_framework import tool

    @tool
    def fetch(page: int) -> str:
        """Fetch one page of the report."""
        return str(page)

    reducer = MessageReducer(config=agent_config(max_tokens=5000, token_counter="approximate"))
    calls: list[tuple[Any, Any]] = []
    count = reducer.set_request_overhead

    def spy(*, tools: Any = (), system_prompt: str | None = None) -> int:
        calls.append((tools, system_prompt))
        return count(tools=tools, system_prompt=system_prompt)

    reducer.set_request_overhead = spy  # type: ignore[method-assign]
    middleware = ReducingChatMiddleware(reducer)
    options = {"tools": [fetch], "instructions": "Be brief."}
    middleware._see(options)
    middleware._see(options)
    assert len(calls) == 1
    (tools, system), = calls
    assert system == "Be brief." and tools == [fetch.to_json_schema_spec()]
    assert count(tools=tools, system_prompt=system) > count()
