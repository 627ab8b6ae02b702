"""``ReducerResult`` is generic in the message type: checked at run time and by mypy."""

from __future__ import annotations

import dataclasses
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from agentstate_reducer import MessageReducer, ReducerResult
from agentstate_reducer.config import MessageT

TYPED = Path(__file__).parent / "typed" / "result_types.py"

#: The documented fields, in order (README, docs): the generic must not change them.
FIELDS = (
    "surviving", "pruned", "summary", "summary_failed", "edited", "messages_before",
    "messages_after", "tokens_before", "tokens_after", "pruned_by_reason", "over_target",
    "over_budget", "over_because", "repaired", "summary_missing", "summary_invented",
)


def test_the_result_is_a_frozen_dataclass_generic_in_its_messages() -> None:
    names = [f.name for f in dataclasses.fields(ReducerResult)]
    assert [n for n in names if n in FIELDS] == list(FIELDS)
    assert ReducerResult.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert typing.get_args(ReducerResult[dict[str, Any]]) == (dict[str, Any],)
    hints = typing.get_type_hints(ReducerResult)
    for name in ("surviving", "pruned", "repaired"):
        assert hints[name] == list[MessageT], name
    result = MessageReducer(1, 2).reduce([{"role": "user", "content": str(i)} for i in range(4)])
    assert isinstance(result, ReducerResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.surviving = []  # type: ignore[misc]


@pytest.mark.slow
def test_mypy_types_a_reduce_by_its_messages(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    root = Path(__file__).parents[2]
    limit = sys.getrecursionlimit()
    try:
        out, err, status = api.run([
            "--strict", "--config-file", str(root / "pyproject.toml"),
            "--cache-dir", str(tmp_path / "cache"), str(TYPED),
        ])
    finally:
        # mypy raises the interpreter's recursion limit (to 2**14) and leaves it there,
        # which changes what later tests of too-deep structures see.
        sys.setrecursionlimit(limit)
    assert status == 0, out + err
    assert "Success" in out
