"""The generated agent histories every benchmark in ``make bench`` runs on.

Deterministic (a seeded generator), plain OpenAI chat dicts with no dependency on any
package, so the published 0.5.0 reads exactly what this checkout reads. About 40% of
turns call a tool (a user question, an assistant tool call, its result, an answer);
the rest are a question and an answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

_WORDS = (
    "the", "report", "shows", "revenue", "grew", "in", "the", "third", "quarter", "while",
    "costs", "stayed", "flat", "and", "team", "plans", "to", "hire", "two", "engineers",
    "next", "month", "keep", "up", "with", "support", "requests", "from", "customers",
    "who", "asked", "about", "pricing", "latency", "errors", "deployment", "region",
    "invoice", "refund", "schedule",
)
SYSTEM = {"role": "system", "content": "You are a careful research agent. " * 8, "id": "sys"}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)) + "."


def messages(seed: int = 0) -> Iterator[dict[str, Any]]:
    """An endless conversation after the system prompt: turns, ~40% of them with a tool call.

    Ids and call ids are unique per seed.
    """
    rng = random.Random(seed)
    tag = f"s{seed}-" if seed else ""
    turn = 0
    while True:
        question = _text(rng, rng.randint(8, 30))
        yield {"role": "user", "content": question, "id": f"{tag}u{turn}"}
        if rng.random() < 0.4:
            call = f"{tag}call_{turn}"
            yield {
                "role": "assistant",
                "content": None,
                "id": f"{tag}a{turn}",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "search",
                            "arguments": json.dumps({"q": _text(rng, 4)}),
                        },
                    }
                ],
            }
            yield {
                "role": "tool",
                "tool_call_id": call,
                "content": _text(rng, rng.randint(40, 120)),
                "id": f"{tag}t{turn}",
            }
        answer = _text(rng, rng.randint(15, 60))
        yield {"role": "assistant", "content": answer, "id": f"{tag}r{turn}"}
        turn += 1


def history(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """The system prompt and the first ``n - 1`` messages of :func:`messages`."""
    out = [dict(SYSTEM)]
    stream = messages(seed)
    while len(out) < n:
        out.append(next(stream))
    return out


def as_langchain(dicts: list[dict[str, Any]]) -> list[Any]:
    """The same history as LangChain message objects (needs ``langchain_core``)."""
    from langchain_core.messages import convert_to_messages

    return list(convert_to_messages(dicts))
