"""Summary blocks: the default factory and fitting its messages to the conversation's shape."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ("SUMMARY_ACK", "default_summary_messages_factory", "match_shape")

#: Text of the ai message that follows the injected summary.
SUMMARY_ACK = "OK"


def default_summary_messages_factory(summary: str, count: int) -> list[Any]:
    """Build the default summary block: a user message carrying the summary, then ``"OK"``.

    The block is a plain human/ai pair, so a later prune folds it into the next summary.
    Returns OpenAI-style dicts with fresh ids; ``MessageReducer`` converts them to
    LangChain messages when the conversation is made of those.
    """
    noun = "message" if count == 1 else "messages"
    return [
        {
            "role": "user",
            "content": f"Summary of the {count} earlier {noun}:\n{summary}",
            "id": f"summary-{uuid.uuid4().hex}",
        },
        {"role": "assistant", "content": SUMMARY_ACK, "id": f"summary-ack-{uuid.uuid4().hex}"},
    ]


def _is_langchain(message: object) -> bool:
    module = type(message).__module__
    return module.startswith("langchain_core.") or module.startswith("langchain.")


def _uses_langchain_roles(sample: Mapping[str, Any]) -> bool:
    if "role" in sample:
        return sample["role"] in ("human", "ai")
    return sample.get("type") in ("human", "ai")


def match_shape(block: list[Any], sample: object) -> list[Any]:
    """Convert the default factory's dicts to the kind of message ``sample`` is.

    LangChain messages become ``HumanMessage``/``AIMessage``; dicts using LangChain
    role names (``human``/``ai``) get those; anything else is left as it is.
    """
    if _is_langchain(sample):
        from langchain_core.messages import AIMessage, HumanMessage

        out: list[Any] = []
        for message in block:
            cls = HumanMessage if message["role"] == "user" else AIMessage
            out.append(cls(content=message["content"], id=message["id"]))
        return out
    if isinstance(sample, Mapping) and _uses_langchain_roles(sample):
        key = "role" if "role" in sample else "type"
        names = {"user": "human", "assistant": "ai"}
        return [{key: names[m["role"]], "content": m["content"], "id": m["id"]} for m in block]
    return block
