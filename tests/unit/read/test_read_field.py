"""What the shape readers share (read/_field.py)."""

from __future__ import annotations

from agentstate_reducer.read._field import per_class


def test_per_class_runs_the_test_once_per_class() -> None:
    asked: list[type] = []

    def test(cls: type) -> bool:
        asked.append(cls)
        return cls is int

    check = per_class(test)
    assert [check(1), check(2), check("a"), check("b"), check(3)] == [
        True, True, False, False, True
    ]
    assert asked == [int, str]
