"""Token mode under a real checkpointer: 200 turns of a tool-calling graph over SqliteSaver.

Every turn the checkpoint comes back deserialised, as new message objects; the exact
counter must still tokenize each text once per process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import add_messages

from agentstate_reducer import MessageReducer, ReducerConfig, tokens, validate_history
from agentstate_reducer.langgraph import ReducingSaver

pytest.importorskip("tiktoken")

TURNS = 200
MAX_TOKENS = 1_500


def recording_counter() -> tuple[tokens.TokenCounter, Counter[str]]:
    """A fresh exact o200k_base counter that records every text it tokenizes."""
    counter = tokens.encodings._ExactCounter(tokens.load_o200k_base())
    seen: Counter[str] = Counter()
    encode: Callable[[str], list[int]] = counter._encode

    def recorded(text: str) -> list[int]:
        seen[text] += 1
        return encode(text)

    counter._encode = recorded
    return counter, seen


@pytest.mark.slow
def test_two_hundred_turns_tokenize_each_text_once(kit: Any) -> None:
    counter, seen = recording_counter()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=4, max_tokens=MAX_TOKENS, token_counter=counter, start_on="human"
        )
    )
    model = kit.model(TURNS)
    config = {"configurable": {"thread_id": "tokens-200"}}
    with SqliteSaver.from_conn_string(":memory:") as inner:
        graph = kit.message_graph(model, add_messages, ReducingSaver(inner, reducer))
        for turn in range(TURNS):
            graph.invoke(kit.turn_input(turn), config)
        final = graph.get_state(config).values["messages"]
    assert final[-1].id == f"ai-{TURNS - 1}"
    for context in model.contexts:
        for provider in ("openai", "anthropic"):
            assert validate_history(context, provider=provider) == [], provider
    # Bounded: what is stored after each turn fits the budget (plus the turn in progress).
    assert sum(counter(m) for m in final) <= MAX_TOKENS
    assert len(model.contexts) > TURNS  # a request per answer, one more per tool round
    assert seen, "the counter was used"
    assert max(seen.values()) == 1, seen.most_common(3)


MIDDLEWARE_TURNS = 30
MIDDLEWARE_BUDGET = 900


@pytest.mark.slow
def test_the_middleware_leaves_room_for_the_tools_and_system_prompt(kit: Any) -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from agentstate_reducer.langgraph import ReducingMiddleware

    counter = tokens.exact_token_counter()
    reducer = MessageReducer(
        config=ReducerConfig(
            min_messages=2, max_tokens=MIDDLEWARE_BUDGET, token_counter="o200k_base",
            start_on="human",
        )
    )
    model = kit.model(MIDDLEWARE_TURNS)
    agent = create_agent(
        model,
        list(kit.tools),
        system_prompt=kit.system_prompt,
        middleware=[ReducingMiddleware(reducer)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "tokens-mw"}}
    for turn in range(MIDDLEWARE_TURNS):
        agent.invoke({"messages": [kit.human(turn)]}, config)
    overhead = tokens.request_overhead(
        counter, tools=list(kit.tools), system_prompt=kit.system_prompt
    )
    assert overhead > 50
    assert reducer._overhead == overhead
    sizes = []
    for context in model.contexts:
        body = [m for m in context if m.type != "system"]
        for provider in ("openai", "anthropic"):
            assert validate_history(body, provider=provider) == [], provider
        sizes.append(sum(counter(m) for m in body))
    # From the second request on, the history the model gets fits what the budget leaves.
    assert max(sizes[1:]) + overhead <= MIDDLEWARE_BUDGET
    assert max(sizes) + overhead > MIDDLEWARE_BUDGET // 2  # the budget was reached
