"""Quick start: bound an OpenAI-style history and watch tool pairs stay whole."""

from __future__ import annotations

import json

from agentstate_reducer import MessageReducer, ReducerConfig


def main() -> None:
    delivered: list[object] = []
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=4,
            max_messages=8,
            on_prune=[lambda pruned, ns: delivered.extend(pruned)],
        )
    )
    history: list[dict[str, object]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(6):
        new = [
            {"role": "user", "content": f"question {turn}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{turn}",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"q": turn})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": f"result {turn}"},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
        history = reducer.reduce(existing=history, new=new).surviving
        roles = " ".join(str(m["role"]) for m in history)
        print(f"turn {turn}: {len(history):2d} kept [{roles}]  long-term memory: {len(delivered)}")


if __name__ == "__main__":
    main()
