"""What the adapted PydanticAI history-processor tests share (test_pydantic_ai_*.py).

``Agent(...)`` here is PydanticAI's ``Agent`` with the package's reduction put first and
last among its capabilities, with a reducer that never prunes: first, the test's own
processors must see the history as PydanticAI built it; last, the model must be sent (and
the run must store) exactly what they returned. :data:`FLAVOURS` are the three ways the
package offers the reduction (``ReducingCapability``, ``ProcessHistory(history_processor)``,
``ProcessHistory(ahistory_processor)``); the ``reducing_flavour`` fixture of
``tests/peers/conftest.py`` runs each test once per flavour.

``IsDatetime``, ``IsStr``, ``IsInstance`` and ``snapshot`` stand in for the dirty-equals
matchers and the inline-snapshot wrapper the peer's own conftest provides: a matcher equals
any value of its type (``IsStr(regex=...)`` one matching it whole), ``snapshot(value)``
is ``value``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.capabilities import ProcessHistory

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.pydantic_ai import (
    ReducingCapability,
    ahistory_processor,
    history_processor,
)

NEVER = 1_000_000
FLAVOURS = ("capability", "sync processor", "async processor")
if os.environ.get("PEERS_BASELINE"):
    FLAVOURS = ("none",)
#: Which flavour the running test uses (set by the ``reducing_flavour`` fixture).
flavour = ["capability"]


def never_prunes() -> MessageReducer:
    """A reducer with nothing to prune in any of the peer's tests."""
    return MessageReducer(config=ReducerConfig(min_messages=NEVER - 1, max_messages=NEVER))


def reducing() -> Any:
    """The package's reduction, as the current flavour offers it."""
    reducer = never_prunes()
    if flavour[0] == "capability":
        return ReducingCapability(reducer)
    if flavour[0] == "sync processor":
        return ProcessHistory(history_processor(reducer))
    return ProcessHistory(ahistory_processor(reducer))


def Agent(*args: Any, capabilities: Any = None, **kwargs: Any) -> Any:
    """PydanticAI's ``Agent``, the reduction first and last among its capabilities."""
    if flavour[0] == "none":  # the peer's own behaviour, to compare with
        return PydanticAgent(*args, capabilities=capabilities, **kwargs)
    chain = [reducing(), *(capabilities or ()), reducing()]
    return PydanticAgent(*args, capabilities=chain, **kwargs)


class _Matcher:
    kind: type = object
    regex: str | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, self.kind):
            return False
        return self.regex is None or re.fullmatch(self.regex, str(other)) is not None

    def __repr__(self) -> str:
        return f"Is({self.kind.__name__})"

    __hash__ = None  # type: ignore[assignment]


def IsInstance(kind: type) -> Any:
    matcher = _Matcher()
    matcher.kind = kind
    return matcher


def IsDatetime() -> Any:
    return IsInstance(datetime)


def IsStr(*, regex: str | None = None) -> Any:
    matcher = IsInstance(str)
    matcher.regex = regex
    return matcher


def snapshot(value: Any) -> Any:
    return value


def module_factory(tmp_path: Path, name: str) -> Callable[[str], ModuleType]:
    """The peer's ``create_module`` fixture: write ``source`` to a file, import it."""

    def create(source: str) -> ModuleType:
        module_name = f"peer_module_{name}"
        path = tmp_path / f"{module_name}.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return module

    return create
