"""agentstate_reducer.adk without a runner: the request step, its errors, the missing extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from agentstate_reducer import MessageReducer, agent_config, validate_history
from agentstate_reducer.adk import ReducingPlugin, reducing_before_model_callback
from agentstate_reducer.errors import ConfigTypeError


def context(session: str = "s-1") -> Any:
    return SimpleNamespace(session=SimpleNamespace(id=session))


def text(role: str, value: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=value)])


def step(k: int, size: int = 20) -> list[types.Content]:
    call = types.FunctionCall(name="fetch", args={"page": k})
    response = types.FunctionResponse(name="fetch", response={"result": f"page {k} " * size})
    return [
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        types.Content(role="user", parts=[types.Part(function_response=response)]),
    ]


def request(turns: int) -> LlmRequest:
    contents: list[types.Content] = []
    for t in range(turns):
        contents += [text("user", f"question {t}"), *step(t), text("model", f"answer {t}")]
    contents.append(text("user", f"question {turns}"))
    return LlmRequest(contents=contents)


class Memory:
    def __init__(self) -> None:
        self.got: list[tuple[Any, Any]] = []

    def __call__(self, pruned: list[Any], namespace: Any) -> None:
        self.got.extend((namespace, m) for m in pruned)


async def test_the_plugin_bounds_the_contents_and_hands_each_pruned_one_over_once() -> None:
    memory = Memory()
    reducer = MessageReducer(config=agent_config(min_messages=4, max_messages=8,
                                                 on_prune=[memory]))
    plugin = ReducingPlugin(reducer)
    for turns in (5, 6):
        llm_request = request(turns)
        assert await plugin.before_model_callback(
            callback_context=context(), llm_request=llm_request
        ) is None
        sent = [c.model_dump(mode="json", exclude_none=True) for c in llm_request.contents]
        assert len(sent) <= 8 and validate_history(sent, provider="gemini") == []
        assert all(isinstance(c, types.Content) for c in llm_request.contents)
    # The second request prunes the first one's contents again: handed over once.
    handed = [repr(m) for _, m in memory.got]
    assert len(handed) == len(set(handed)) and {ns for ns, _ in memory.got} == {
        ("memories", "s-1")
    }
    assert all(isinstance(m, dict) and "parts" in m for _, m in memory.got)


async def test_the_callback_takes_a_namespace_callable() -> None:
    memory = Memory()
    reducer = MessageReducer(config=agent_config(min_messages=2, max_messages=4,
                                                 on_prune=[memory]))
    callback = reducing_before_model_callback(
        reducer, namespace=lambda ctx: ("tenant", ctx.session.id)
    )
    llm_request = request(4)
    await callback(callback_context=context("s-9"), llm_request=llm_request)
    assert memory.got and {ns for ns, _ in memory.got} == {("tenant", "s-9")}


async def test_an_edited_content_is_rebuilt_with_its_thought_signature() -> None:
    """Cleared results go back as new Contents; a signed call keeps its signature, also
    when its content is rebuilt from JSON (a large input cleared)."""
    reducer = MessageReducer(config=agent_config(max_tokens=1500, target_tokens=1000,
                                                 token_counter="approximate"))
    signature = b"\x00\xffsigned"
    contents = [text("user", "question 0")]
    for k in range(6):
        call, response = step(k, size=150)
        assert call.parts is not None and call.parts[0].function_call is not None
        call.parts[0].thought_signature = signature
        call.parts[0].function_call.args = {"page": k, "text": "words " * 200}
        contents += [call, response]
    llm_request = LlmRequest(contents=contents)
    await ReducingPlugin(reducer).before_model_callback(
        callback_context=context(), llm_request=llm_request
    )
    sent = llm_request.contents
    rebuilt = [c for c in sent if not any(c is o for o in contents)]
    calls = [p for c in rebuilt for p in c.parts or () if p.function_call is not None]
    assert calls and all(p.thought_signature == signature for p in calls)
    cleared = [
        p for c in rebuilt for p in c.parts or ()
        if p.function_response is not None
        and str((p.function_response.response or {}).get("output")).startswith("[cleared: ")
    ]
    assert cleared
    sent_json = [c.model_dump(mode="json", exclude_none=True) for c in sent]
    assert validate_history(sent_json, provider="gemini") == []


async def test_a_request_within_the_window_is_left_as_adk_built_it() -> None:
    llm_request = request(1)
    before = llm_request.contents
    await ReducingPlugin().before_model_callback(callback_context=context(),
                                                 llm_request=llm_request)
    assert llm_request.contents is before


def test_tool_declarations_and_instruction_count_against_the_budget() -> None:
    reducer = MessageReducer(config=agent_config(max_tokens=5000, token_counter="approximate"))
    plugin = ReducingPlugin(reducer)
    declaration = types.FunctionDeclaration(
        name="fetch", description="Fetch a page. " * 50,
        parameters_json_schema={"type": "object", "properties": {"page": {"type": "integer"}}},
    )
    llm_request = request(1)
    llm_request.config = types.GenerateContentConfig(
        system_instruction="Be brief.", tools=[types.Tool(function_declarations=[declaration])]
    )
    plugin._reduce._see(llm_request)
    assert reducer.set_request_overhead() < reducer.set_request_overhead(
        tools=[declaration.model_dump(mode="json", exclude_none=True)]
    )


def test_a_wrong_reducer_is_refused() -> None:
    with pytest.raises(ConfigTypeError, match="MessageReducer"):
        ReducingPlugin(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigTypeError, match="MessageReducer"):
        reducing_before_model_callback("r")  # type: ignore[arg-type]


def test_missing_adk_names_the_extra() -> None:
    script = textwrap.dedent(
        """
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "google":
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        try:
            import agentstate_reducer.adk
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert 'pip install "agentstate-reducer[adk]"' in out.stdout


def test_a_system_instruction_content_counts_as_its_text() -> None:
    from agentstate_reducer.adk import _text

    assert _text(None) is None and _text("Be brief.") == "Be brief."
    assert _text(types.Content(parts=[types.Part(text="Be"), types.Part(text="brief.")])) == (
        "Be\nbrief."
    )
