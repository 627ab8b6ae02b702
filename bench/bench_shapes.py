"""One reduce() and one trim_messages() over 10,000 messages, per message shape.

The same conversation (a question, a tool call, its result, an answer, repeated) written
in each shape the package reads: OpenAI chat dicts, LangChain messages, Anthropic dicts
with content blocks, Gemini contents, Bedrock Converse messages, OpenAI Responses items
(a turn is five items: the reasoning item goes with its call) and PydanticAI messages
(a thinking part with the call). Prints milliseconds
of CPU time per call (best of several runs, garbage collection off while timing) for a
count-mode reduce, a token-mode reduce and a token trim.

    python bench/bench_shapes.py [--size N] [--runs K] [SHAPE ...]

To compare two checkouts, run it under each (``PYTHONPATH=<checkout>/src``) and take the
ratio line by line; ``farm-bench --vs`` pairs the runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from typing import Any

from agentstate_reducer import MessageReducer, ReducerConfig, trim_messages


def _openai(turn: int) -> list[Any]:
    call = f"call_{turn}"
    return [
        {"role": "user", "content": f"question {turn} " * 8},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "search", "arguments": json.dumps({"q": turn})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": f"result {turn} " * 20},
        {"role": "assistant", "content": f"answer {turn} " * 10},
    ]


def _langchain(turn: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = f"call_{turn}"
    return [
        HumanMessage(f"question {turn} " * 8, id=f"u{turn}"),
        AIMessage(
            "", tool_calls=[{"id": call, "name": "search", "args": {"q": turn}}], id=f"a{turn}"
        ),
        ToolMessage(f"result {turn} " * 20, tool_call_id=call, id=f"t{turn}"),
        AIMessage(f"answer {turn} " * 10, id=f"b{turn}"),
    ]


def _anthropic(turn: int) -> list[Any]:
    call = f"toolu_{turn}"
    return [
        {"role": "user", "content": f"question {turn} " * 8},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look it up", "signature": "c2ln"},
                {"type": "tool_use", "id": call, "name": "search", "input": {"q": turn}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call, "content": f"result {turn} " * 20}
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {turn} " * 10}]},
    ]


def _gemini(turn: int) -> list[Any]:
    return [
        {"role": "user", "parts": [{"text": f"question {turn} " * 8}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "search", "args": {"q": turn}},
                    "thoughtSignature": "c2ln",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "search",
                        "response": {"output": f"result {turn} " * 20},
                    }
                }
            ],
        },
        {"role": "model", "parts": [{"text": f"answer {turn} " * 10}]},
    ]


def _bedrock(turn: int) -> list[Any]:
    call = f"tooluse_{turn}"
    return [
        {"role": "user", "content": [{"text": f"question {turn} " * 8}]},
        {
            "role": "assistant",
            "content": [
                {
                    "reasoningContent": {
                        "reasoningText": {"text": "look it up", "signature": "c2ln"}
                    }
                },
                {"toolUse": {"toolUseId": call, "name": "search", "input": {"q": turn}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": call, "content": [{"text": f"result {turn} " * 20}]}}
            ],
        },
        {"role": "assistant", "content": [{"text": f"answer {turn} " * 10}]},
    ]


def _responses(turn: int) -> list[Any]:
    call = f"call_{turn}"
    return [
        {"role": "user", "content": f"question {turn} " * 8},
        {
            "type": "reasoning",
            "id": f"rs_{turn}",
            "summary": [{"type": "summary_text", "text": "look it up"}],
            "encrypted_content": "gAAAAc2ln",
        },
        {
            "type": "function_call",
            "id": f"fc_{turn}",
            "call_id": call,
            "name": "search",
            "arguments": json.dumps({"q": turn}),
        },
        {"type": "function_call_output", "call_id": call, "output": f"result {turn} " * 20},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{turn}",
            "content": [{"type": "output_text", "text": f"answer {turn} " * 10}],
        },
    ]


def _pydantic_ai(turn: int) -> list[Any]:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    call = f"call_{turn}"
    return [
        ModelRequest(parts=[UserPromptPart(f"question {turn} " * 8)]),
        ModelResponse(
            parts=[ThinkingPart("look it up"), ToolCallPart("search", {"q": turn}, call)]
        ),
        ModelRequest(parts=[ToolReturnPart("search", f"result {turn} " * 20, call)]),
        ModelResponse(parts=[TextPart(f"answer {turn} " * 10)]),
    ]


SHAPES: dict[str, Callable[[int], list[Any]]] = {
    "openai": _openai,
    "langchain": _langchain,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "bedrock": _bedrock,
    "responses": _responses,
    "pydantic_ai": _pydantic_ai,
}


def history(shape: str, n: int) -> list[Any]:
    out: list[Any] = []
    turn = 0
    while len(out) < n:
        out += SHAPES[shape](turn)
        turn += 1
    return out[:n]


def best_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        gc.disable()
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
        gc.enable()
    return min(times) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", metavar="SHAPE", help=", ".join(SHAPES))
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    for shape in args.shapes:
        if shape not in SHAPES:
            parser.error(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}")
    args.shapes = args.shapes or list(SHAPES)
    print(f"{args.size:,} messages, best of {args.runs} (ms of CPU time)")
    print(f"{'shape':<12} {'reduce count':>13} {'reduce tokens':>14} {'trim':>8}")
    for shape in args.shapes:
        print(f"{shape:<12} " + " ".join(measure(history(shape, args.size), args.runs)))


def measure(h: list[Any], runs: int) -> list[str]:
    """The three figures for one history, formatted for the table."""
    count = ReducerConfig(min_messages=100, max_messages=200, preserve_first=False)
    tokens = ReducerConfig(max_tokens=20_000, target_tokens=15_000, token_counter="approximate")
    by_count = best_ms(lambda: MessageReducer(config=count).reduce(h), runs)
    by_tokens = best_ms(lambda: MessageReducer(config=tokens).reduce(h), runs)
    trimmed = best_ms(
        lambda: trim_messages(h, max_tokens=20_000, token_counter="approximate"), runs
    )
    return [f"{by_count:>13.2f}", f"{by_tokens:>14.2f}", f"{trimmed:>8.2f}"]


if __name__ == "__main__":
    main()
