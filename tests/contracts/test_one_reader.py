"""The reader is the only place that knows message shapes (issue 11).

Every module under ``src/`` is parsed; outside the reader (the package ``read/``) no
module may name a message-shape key in a subscript, a ``.get``/``.pop``/``.setdefault``,
an ``in`` test, a ``getattr`` family call or a dict display. Such a module reads a
message through :class:`MessageRecord` and writes one through the reader's writers
(``write_message``, ``match_shape``, ``with_parts``, ``write_request``). The same check by hand::

    grep -rnE "[\\[\\(]\\"(role|content|tool_calls|tool_call_id|parts|type|call_id)\\"" \\
        src/agentstate_reducer --include=*.py | grep -v "/read/"
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agentstate_reducer.errors import MessageFormatError
from agentstate_reducer.read import (
    AI,
    HUMAN,
    INJECTED_KEY,
    SYSTEM,
    is_serialisation_stub,
    read_request,
    reply_text,
    write_message,
    write_request,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "agentstate_reducer"

#: Keys that say what shape a message (or a provider request) is in.
SHAPE_KEYS = frozenset(
    {
        # chat dicts and LangChain messages
        "role", "content", "type", "tool_calls", "tool_call_id", "invalid_tool_calls",
        "function_call", "additional_kwargs", "reasoning_content", "args", "arguments",
        "function",
        # LangChain serialisations (dumpd, messages_to_dict)
        "lc", "kwargs", "data",
        # Anthropic blocks
        "tool_use_id", "thinking", "redacted_thinking", "signature",
        # Gemini contents
        "parts", "functionCall", "functionResponse", "function_response", "thoughtSignature",
        "thought_signature", "thought",
        # Bedrock Converse
        "toolUse", "toolResult", "toolUseId", "reasoningContent",
        # OpenAI Responses items
        "call_id", "output", "summary", "encrypted_content",
        # requests: where the conversation and the system prompt live
        "messages", "contents", "input", "system", "systemInstruction", "system_instruction",
        "instructions",
    }
)


def _is_reader(path: Path) -> bool:
    return path.parent.name == "read"


#: ``(module, enclosing function, key)`` uses that are not message shapes; each says why.
ALLOWED: dict[tuple[str, str, str], str] = {
    # context editing's note on a copy (read back by messages.package_note), the package's
    # own metadata: "call_id" names the edited call there, not a Responses item's link
    ("_edits.py", "original", "call_id"): "the package's edit note",
    # LangGraph's agent state holds the conversation under "messages": a state key
    ("langgraph/_middleware.py", "before_model", "messages"): "LangGraph state key",
    ("langgraph/_middleware.py", "abefore_model", "messages"): "LangGraph state key",
    # the store's own value for a pruned message (docs/langgraph.md), written from the
    # record and read back only as that value, never as a message
    **{
        ("langgraph/_store.py", "_record", key): "the store's record format"
        for key in ("role", "content", "tool_calls", "tool_call_id", "arguments")
    },
    **{
        ("langgraph/_store.py", "_original_text", key): "the store's record format"
        for key in ("content", "tool_calls", "arguments")
    },
    # a tool's function schema, as it is sent (and billed): not a message
    ("openai_agents.py", "_tool_schema", "type"): "a tool schema",
    ("pydantic_ai.py", "_tool_schema", "type"): "a tool schema",
    ("pydantic_ai.py", "_tool_schema", "function"): "a tool schema",
    ("agent_framework.py", "_tool_schema", "type"): "a tool schema",
    ("agent_framework.py", "_tool_schema", "function"): "a tool schema",
    # Agent Framework's chat options: the request's system prompt, not a message
    ("agent_framework.py", "_see", "instructions"): "the chat options' instructions",
}

_ATTR_CALLS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
_GET_METHODS = frozenset({"get", "pop", "setdefault"})


def _key(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if node.value in SHAPE_KEYS else None
    return None


def _keys(node: ast.AST) -> list[str]:
    """The shape keys ``node`` itself names (its children are visited on their own)."""
    found: list[str | None] = []
    if isinstance(node, ast.Subscript):
        found.append(_key(node.slice))
    elif isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _GET_METHODS:
            found.append(_key(node.args[0]))
        elif isinstance(func, ast.Name) and func.id in _ATTR_CALLS and len(node.args) > 1:
            found.append(_key(node.args[1]))
    elif isinstance(node, ast.Compare):
        if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            found.append(_key(node.left))
    elif isinstance(node, ast.Dict):
        found.extend(_key(k) for k in node.keys)
    return [k for k in found if k is not None]


class _Finder(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.where: list[str] = []
        self.found: list[tuple[str, str, str, int]] = []

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def generic_visit(self, node: ast.AST) -> None:
        scope = self.where[-1] if self.where else "<module>"
        for key in _keys(node):
            self.found.append((self.module, scope, key, getattr(node, "lineno", 0)))
        super().generic_visit(node)


def shape_checks() -> list[tuple[str, str, str, int]]:
    """``(module, function, key, line)`` of every shape-key use outside the reader."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if _is_reader(path):
            continue
        module = path.relative_to(SRC).as_posix()
        finder = _Finder(module)
        finder.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found.extend(finder.found)
    return found


def test_no_module_outside_the_reader_knows_a_message_shape() -> None:
    stray = [
        f"{module}:{line} ({function}) uses {key!r}"
        for module, function, key, line in shape_checks()
        if (module, function, key) not in ALLOWED
    ]
    assert not stray, "shape checks outside the reader:\n" + "\n".join(stray)


def test_every_allowed_use_still_exists() -> None:
    """An allow-list entry whose use went away is dropped, so the list stays short."""
    used = {(module, function, key) for module, function, key, _ in shape_checks()}
    assert sorted(set(ALLOWED) - used) == []


def test_the_check_finds_a_shape_check() -> None:
    tree = ast.parse(
        "def f(m):\n"
        "    if m.get('role') == 'tool' and 'tool_calls' in m:\n"
        "        return m['content'], getattr(m, 'parts', None), {'type': 'text'}\n"
    )
    finder = _Finder("x.py")
    finder.visit(tree)
    assert sorted(key for _, _, key, _ in finder.found) == [
        "content", "parts", "role", "tool_calls", "type"
    ]


# -- what moved into the reader: requests, and writing messages ---------------------


_CONVERSE_CALL = {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "f",
                                                                "input": {}}}]}


@pytest.mark.parametrize(
    ("document", "kind", "list_key", "system_key"),
    [
        ({"model": "gpt", "messages": []}, "openai", "messages", None),
        ({"messages": []}, "", "messages", None),
        ({"system": "s", "messages": []}, "anthropic", "messages", "system"),
        ({"messages": [{"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}, "anthropic",
         "messages", None),
        ({"modelId": "m", "messages": []}, "bedrock", "messages", None),
        ({"system": [{"text": "s"}], "messages": []}, "bedrock", "messages", "system"),
        ({"messages": [_CONVERSE_CALL]}, "bedrock", "messages", None),
        ({"contents": [], "systemInstruction": "s"}, "gemini", "contents", "systemInstruction"),
        ({"contents": [], "system_instruction": {"parts": [{"text": "s"}]}}, "gemini",
         "contents", "system_instruction"),
        ({"model": "gpt", "instructions": "s", "input": []}, "openai-responses", "input",
         "instructions"),
        ({"input": []}, "openai-responses", "input", None),
    ],
)
def test_read_request_finds_where_each_request_keeps_its_parts(
    document: dict[str, object], kind: str, list_key: str, system_key: str | None
) -> None:
    request = read_request(document)
    assert request is not None
    assert (request.kind, request.list_key, request.system_key) == (kind, list_key, system_key)
    assert request.messages is document[list_key]
    assert (request.system is None) == (system_key is None)
    if request.system is not None:
        assert request.planned[0] is request.system
    # Written back with everything kept, the request is the same, key for key, in order.
    again = write_request(request, list(request.messages), request.system)
    assert list(again) == list(document) and again == document


def test_read_request_of_other_objects_and_of_bad_lists() -> None:
    assert read_request({"role": "user", "content": "hi"}) is None
    for document, message in [
        ({"messages": "hi"}, '"messages" must be a list of messages'),
        ({"contents": {}}, '"contents" must be a list of Gemini contents'),
        ({"contents": [], "systemInstruction": 3}, '"systemInstruction" must be a content'),
        ({"input": "hi"}, '"input" must be a list of items'),
    ]:
        with pytest.raises(MessageFormatError, match=message):
            read_request(document)


def test_write_request_drops_or_rewrites_the_system_prompt() -> None:
    anthropic = read_request({"system": "long prompt", "messages": [], "model": "c"})
    assert anthropic is not None and anthropic.system is not None
    assert write_request(anthropic, []) == {"messages": [], "model": "c"}
    cut = {**anthropic.system, "content": "long"}  # trim's partial copy
    assert write_request(anthropic, [], cut) == {"system": "long", "messages": [], "model": "c"}
    gemini = read_request({"contents": [], "systemInstruction": {"parts": [{"text": "a b"}]}})
    assert gemini is not None and gemini.system == {"parts": [{"text": "a b"}], "role": "system"}
    changed = {"parts": [{"text": "a"}], "role": "system"}
    assert write_request(gemini, [], changed)["systemInstruction"] == {"parts": [{"text": "a"}]}
    responses = read_request({"instructions": "be brief", "input": []})
    assert responses is not None and responses.planned == [
        {"role": "system", "content": "be brief"}
    ]
    assert write_request(responses, []) == {"input": []}


def test_write_message_spells_roles_as_chat_dicts_and_keeps_field_order() -> None:
    mark = {INJECTED_KEY: {"kind": "summary"}}
    assert list(write_message(HUMAN, "q", id="s", **mark).items()) == [
        ("role", "user"), ("content", "q"), ("id", "s"), (INJECTED_KEY, {"kind": "summary"})
    ]
    assert write_message(AI, "a") == {"role": "assistant", "content": "a"}
    assert write_message(SYSTEM, "s") == {"role": "system", "content": "s"}
    assert write_message("developer", "d") == {"role": "developer", "content": "d"}


def test_reply_text_reads_a_reply_of_any_shape() -> None:
    from langchain_core.messages import AIMessage

    assert reply_text(None) is None and reply_text("x") == "x"
    assert reply_text(AIMessage(content="a summary")) == "a summary"
    blocks = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert reply_text(AIMessage(content=blocks)) == "one\ntwo"  # never the list's repr
    assert reply_text({"role": "assistant", "content": blocks}) == "one\ntwo"
    assert reply_text(42) == "42"


def test_a_summarize_fn_returning_a_message_of_blocks_gives_its_text() -> None:
    from langchain_core.messages import AIMessage

    from agentstate_reducer import MessageReducer, ReducerConfig

    reply = AIMessage(content=[{"type": "text", "text": "the facts"}])
    config = ReducerConfig(max_messages=4, min_messages=2, summarize_fn=lambda p: reply)
    history = [{"role": "user", "content": str(i), "id": str(i)} for i in range(8)]
    assert MessageReducer(config=config).reduce(history).summary == "the facts"


def test_serialisation_stub() -> None:
    assert is_serialisation_stub({"lc": 1, "type": "not_implemented", "id": ["x"]})
    assert not is_serialisation_stub({"lc": 1, "type": "constructor", "id": ["x"]})
    assert not is_serialisation_stub(json.loads('["lc"]'))
