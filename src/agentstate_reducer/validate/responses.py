"""The checks of OpenAI Responses API item lists."""

from __future__ import annotations

from typing import Any

from ..plan import response_units
from ..read import (
    AI,
    GROUP_REASONING,
    HUMAN,
    SYSTEM,
    TOOL,
    MessageRecord,
    item_type,
    read_messages,
)
from .rules import (
    _KNOWN_ROLES,
    DUPLICATE_ITEM,
    ORPHAN_RESULT,
    REASONING_ALONE,
    UNANSWERED_CALL,
    Problem,
    _unknown_role,
)


def _item_label(message: object, view: MessageRecord) -> str:
    kind = item_type(message)
    if kind is not None:
        return kind
    return "message" if view.role in (HUMAN, AI, SYSTEM) else f"{view.role} message"


def _check_responses(messages: list[Any]) -> list[Problem]:
    """The OpenAI Responses API rules: outputs and calls paired by ``call_id`` anywhere
    in the input, reasoning followed by its item, item ids unique."""
    views = read_messages(messages)
    problems: list[Problem] = []
    n = len(views)
    last = max((i for i, v in enumerate(views) if v.role in (HUMAN, AI)), default=-1)
    pending_from = n
    if last >= 0 and views[last].role == AI:
        pending_from = last
        for begin, end in response_units(views):
            if begin <= last < end:
                pending_from = begin
    issued: dict[str, int] = {}
    answered: set[str] = set()
    seen: dict[str, int] = {}
    for i, view in enumerate(views):
        if view.role not in _KNOWN_ROLES:  # for every provider, before its own rules
            problems.append(_unknown_role(i, view.role))
            continue
        if view.id is not None:
            if view.id in seen:
                problems.append(
                    Problem(
                        i,
                        DUPLICATE_ITEM,
                        f"item id {view.id!r} is also the id of item {seen[view.id]} "
                        f"(OpenAI: 'Duplicate item found with id {view.id}.')",
                        "keep one item per id",
                    )
                )
            else:
                seen[view.id] = i
        if view.role == TOOL and not view.answers:
            problems.append(
                Problem(i, ORPHAN_RESULT, f"{_item_label(messages[i], view)} names no call_id",
                        "set call_id to the call_id of the call it answers")
            )
        for call in view.answers:
            if call in issued:
                answered.add(call)
                continue
            problems.append(
                Problem(
                    i,
                    ORPHAN_RESULT,
                    f"{_item_label(messages[i], view)} answers call_id {call!r}, which no "
                    f"earlier item issued (OpenAI: 'No tool call found for function call "
                    f"output with call_id {call}.')",
                    "remove this output, or restore the call item it answers",
                )
            )
        for call in view.calls:
            issued.setdefault(call, i)
        if view.group == GROUP_REASONING and (i + 1 == n or views[i + 1].role != AI):
            label = repr(view.id) if view.id is not None else "(no id)"
            problems.append(
                Problem(
                    i,
                    REASONING_ALONE,
                    f"reasoning item {label} is not followed by the output item it belongs "
                    f"to (OpenAI: 'Item {label} of type 'reasoning' was provided without its "
                    "required following item.')",
                    "keep the reasoning item directly before the message or call items of "
                    "its response, or drop it with them",
                )
            )
    for call, i in issued.items():
        if call not in answered and i < pending_from:
            kind = _item_label(messages[i], views[i]).replace("_", " ")
            problems.append(
                Problem(
                    i,
                    UNANSWERED_CALL,
                    f"call_id {call!r} never gets an output item (OpenAI: 'No tool output "
                    f"found for {kind} {call}.')",
                    "add an output item with this call_id, or remove the call (only the "
                    "calls of the last response may be pending)",
                )
            )
    return sorted(problems, key=lambda p: p.index)
