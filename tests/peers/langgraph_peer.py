"""What the adapted LangGraph ``add_messages`` tests share (tests/peers/test_langgraph_*.py).

``add_messages`` here is this package's replacement for LangGraph's, with a reducer that
never prunes: ``reducing_add_messages(reducer)`` or ``reducer.as_langgraph_reducer()``,
whichever the ``langgraph_flavour`` fixture chose (``PEERS_BASELINE=1``: LangGraph's own).
``AnyStr`` and ``_AnyIdHumanMessage`` are adapted from LangGraph's ``tests/any_str.py``
and ``tests/messages.py`` (langgraph 1.2.24 sdist, MIT): the same matchers, written anew.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.graph import add_messages as langgraph_add_messages
from typing_extensions import TypedDict

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.langgraph import reducing_add_messages

#: A window no test reaches: the reducer never prunes, only merges.
NEVER = 1_000_000
BASELINE = bool(os.environ.get("PEERS_BASELINE"))
FLAVOURS = ("baseline",) if BASELINE else ("reducing_add_messages", "as_langgraph_reducer")

#: The merge the tests call: set per test by the ``langgraph_flavour`` fixture.
current: list[Callable[..., Any]] = [langgraph_add_messages]


def never_prunes() -> MessageReducer:
    """A reducer with nothing to prune in any of LangGraph's tests."""
    return MessageReducer(config=ReducerConfig(min_messages=NEVER - 1, max_messages=NEVER))


def build(flavour: str) -> Callable[..., Any]:
    """A fresh merge of ``flavour``, over a fresh reducer."""
    if flavour == "baseline":
        return langgraph_add_messages
    if flavour == "reducing_add_messages":
        return reducing_add_messages(never_prunes())
    return never_prunes().as_langgraph_reducer()


def add_messages(left: Any = None, right: Any = None, **kwargs: Any) -> Any:
    """The merge of the flavour under test, called as LangGraph's ``add_messages`` is."""
    merge = current[0]
    if left is None and right is None and merge.__name__ == "agentstate_reducer":
        # as_langgraph_reducer() has no partial form: called with options, it is one.
        return functools.partial(merge, **kwargs) if kwargs else merge
    return merge(left, right, **kwargs)


def concatenates(difference: str) -> Callable[[Any], Any]:
    """Mark a test that shows a documented difference of ``as_langgraph_reducer()``: the
    ``langgraph_flavour`` fixture makes it a strict xfail under that flavour only."""

    def mark(test: Any) -> Any:
        test.as_langgraph_reducer_differs = difference
        return test

    return mark


def expect_difference(request: pytest.FixtureRequest, flavour: str) -> None:
    """Under ``as_langgraph_reducer``, a test marked :func:`concatenates` must fail."""
    difference = getattr(request.function, "as_langgraph_reducer_differs", None)
    if flavour == "as_langgraph_reducer" and difference is not None:
        reason = f"documented difference of as_langgraph_reducer(): {difference}"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


class AnyStr(str):
    """Equal to any string that starts with ``prefix``."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__()
        self.prefix = prefix

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(self.prefix)

    def __hash__(self) -> int:
        return hash((str(self), self.prefix))


def _AnyIdHumanMessage(**kwargs: Any) -> HumanMessage:
    """A human message equal to one with any id."""
    message = HumanMessage(**kwargs)
    message.id = AnyStr()
    return message


class MessagesState(TypedDict):
    """LangGraph's ``MessagesState``, its channel merged by :func:`add_messages` here."""

    messages: Annotated[list[AnyMessage], add_messages]
