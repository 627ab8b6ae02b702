"""fast_biller: what a loop that only counts and links reads of a message (tokens.count_back
for trim_messages) is the reader's fast path, a plain LangChain text message given as its
role's shared view and its text instead of its record."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentstate_reducer.read import (
    AI,
    CHAT,
    GROUP_NONE,
    NO_EXTRAS,
    Extras,
    MessageRecord,
    read_message,
    record_group,
)
from agentstate_reducer.read.chat import PLAIN_VIEWS, fast_biller, fast_reader


def _agrees(message: Any) -> None:
    billed = fast_biller(type(message))(message)
    record = fast_reader(type(message))(message)
    if type(billed) is tuple and len(billed) == 2:
        view, text = billed
        assert record is not None and record == read_message(message)
        assert (record.calls, record.answers, record.extras) == ((), (), NO_EXTRAS)
        assert view is PLAIN_VIEWS[record.role] and text == record.text
        assert (view.calls, view.answers, view.extras) == ((), (), NO_EXTRAS)
    elif type(billed) is tuple:
        view, text, name, args = billed
        assert record is not None and record == read_message(message)
        assert record.extras == Extras(None, (), ((name, args),), None, (), 0, (), CHAT)
        assert record_group(record) == GROUP_NONE and record.answers == ()
        assert view == MessageRecord(AI, None, record.calls, (), None, NO_EXTRAS)
        assert text == record.text and len(record.calls) == 1
    else:
        assert billed == record


_texts = st.text(alphabet="ab \n", max_size=5)
_names = st.none() | st.text(alphabet="n", max_size=2)
_ids = st.none() | st.text(alphabet="i", max_size=2)
_calls = st.lists(
    st.fixed_dictionaries({"id": st.text(alphabet="c1", max_size=2), "name": st.just("f"),
                           "args": st.dictionaries(st.just("k"), st.integers(0, 2))}),
    max_size=2,
)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from([HumanMessage, AIMessage, SystemMessage, ToolMessage]),
    content=_texts | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _texts}),
                              max_size=2),
    name=_names,
    ident=_ids,
    calls=_calls,
    extra=st.dictionaries(st.sampled_from(["reasoning_content", "refusal"]), _texts, max_size=1),
    tamper=st.sampled_from(["", "smuggle", "drop", "retype", "extra"]),
)
def test_the_biller_agrees_with_the_reader_on_langchain_messages(
    kind: Any, content: Any, name: str | None, ident: str | None, calls: list[dict[str, Any]],
    extra: dict[str, str], tamper: str,
) -> None:
    fields: dict[str, Any] = {"tool_calls": calls} if kind is AIMessage else {}
    if kind is ToolMessage:
        fields["tool_call_id"] = "c1"
    message = kind(content=content, name=name, id=ident, additional_kwargs=extra, **fields)
    if tamper == "smuggle":  # a field past pydantic, into __dict__
        object.__setattr__(message, "reasoning_content", "hidden")
    elif tamper == "drop":
        del message.__dict__["response_metadata"]
    elif tamper == "retype":
        message.type = "tool" if kind is not ToolMessage else "ai"
    elif tamper == "extra":
        message.__pydantic_extra__["surprise"] = 1  # type: ignore[index]
    _agrees(message)


def test_the_biller_gives_plain_text_messages_without_their_record() -> None:
    human, system = HumanMessage(content="hi", id="h"), SystemMessage(content="")
    assert fast_biller(HumanMessage)(human) == (PLAIN_VIEWS["human"], "hi")
    assert fast_biller(SystemMessage)(system) == (PLAIN_VIEWS["system"], None)
    assert fast_biller(AIMessage)(AIMessage(content="ok")) == (PLAIN_VIEWS["ai"], "ok")
    call = AIMessage(content="", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c"}])
    view = MessageRecord(AI, None, ("c",), (), None, NO_EXTRAS)
    assert fast_biller(AIMessage)(call) == (view, None, "f", {"q": 1})
    two = AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": c} for c in "ab"])
    assert fast_biller(AIMessage)(two) == read_message(two)
    tool = ToolMessage(content="r", tool_call_id="c")
    assert fast_biller(ToolMessage)(tool) == read_message(tool)
    assert fast_biller(dict) is fast_reader(dict)


def test_a_plain_view_is_its_role_alone() -> None:
    for role, view in PLAIN_VIEWS.items():
        assert (view.role, view.id, view.calls, view.answers, view.text, view.extras) == (
            role, None, (), (), None, NO_EXTRAS)
