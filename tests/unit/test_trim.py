"""trim_messages: the seed page's examples, shapes, counters, errors, tool pairs, laws.

The comparison with langchain-core on generated histories is in
``test_trim_differential.py``.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import pytest
from histories import ai, histories, human, results, system
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import wrap_model_call
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.load import dumpd
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.checkpoint.memory import InMemorySaver
from strategies_responses import responses_histories

from agentstate_reducer import (
    ConfigError,
    ConfigTypeError,
    MessageFormatError,
    MessageReducer,
    ReducerConfig,
    resolve_token_counter,
    trim_messages,
)
from agentstate_reducer.read import (
    MessageRecord,
    message_content,
    message_id,
    read_message,
    with_content,
)
from agentstate_reducer.tokens import approximate_token_count
from agentstate_reducer.tokens.heuristic import _approximate_o200k
from agentstate_reducer.trim import trim_selection

# -- the seed page, translated: one test per example ------------------------------------

TEXT = "This is a 4 token text. The full message is 10 tokens."
SEED = [
    SystemMessage(TEXT),
    HumanMessage(TEXT, id="first"),
    AIMessage(
        [
            {"type": "text", "text": "This is the FIRST 4 token block."},
            {"type": "text", "text": "This is the SECOND 4 token block."},
        ],
        id="second",
    ),
    HumanMessage(TEXT, id="third"),
    AIMessage(TEXT, id="fourth"),
]
FIRST_BLOCK = [{"type": "text", "text": "This is the FIRST 4 token block."}]
SECOND_BLOCK = [{"type": "text", "text": "This is the SECOND 4 token block."}]


def dummy_token_counter(messages: list[BaseMessage]) -> int:
    # treat each message like it adds 3 default tokens at the beginning
    # of the message and at the end of the message. 3 + 4 + 3 = 10 tokens
    # per message.
    default_content_len = 4
    default_msg_prefix_len = 3
    default_msg_suffix_len = 3
    count = 0
    for msg in messages:
        if isinstance(msg.content, str):
            count += default_msg_prefix_len + default_content_len + default_msg_suffix_len
        if isinstance(msg.content, list):
            count += (
                default_msg_prefix_len
                + len(msg.content) * default_content_len
                + default_msg_suffix_len
            )
    return count


def seed_trim(**kwargs: Any) -> list[Any]:
    snapshot = copy.deepcopy(SEED)
    out = trim_messages(SEED, token_counter=dummy_token_counter, **kwargs)
    assert snapshot == SEED  # never mutated
    return out


def test_seed_first_30_tokens_whole_messages() -> None:
    out = seed_trim(max_tokens=30, strategy="first")
    assert out == [SystemMessage(TEXT), HumanMessage(TEXT, id="first")]


def test_seed_first_30_tokens_allow_partial() -> None:
    out = seed_trim(max_tokens=30, strategy="first", allow_partial=True)
    assert out == [
        SystemMessage(TEXT),
        HumanMessage(TEXT, id="first"),
        AIMessage(FIRST_BLOCK, id="second"),
    ]
    assert out[2] is not SEED[2]  # a copy


def test_seed_first_30_tokens_allow_partial_end_on_human() -> None:
    out = seed_trim(max_tokens=30, strategy="first", allow_partial=True, end_on="human")
    assert out == [SystemMessage(TEXT), HumanMessage(TEXT, id="first")]


def test_seed_last_30_tokens_include_system() -> None:
    out = seed_trim(max_tokens=30, include_system=True, strategy="last")
    assert out == [
        SystemMessage(TEXT),
        HumanMessage(TEXT, id="third"),
        AIMessage(TEXT, id="fourth"),
    ]


def test_seed_last_40_tokens_include_system_allow_partial() -> None:
    out = seed_trim(max_tokens=40, strategy="last", allow_partial=True, include_system=True)
    assert out == [
        SystemMessage(TEXT),
        AIMessage(FIRST_BLOCK, id="second"),
        HumanMessage(TEXT, id="third"),
        AIMessage(TEXT, id="fourth"),
    ]


def test_seed_last_30_tokens_include_system_allow_partial_end_on_human() -> None:
    out = seed_trim(
        max_tokens=30, strategy="last", end_on="human", include_system=True, allow_partial=True
    )
    assert out == [
        SystemMessage(TEXT),
        AIMessage(FIRST_BLOCK, id="second"),
        HumanMessage(TEXT, id="third"),
    ]


def test_seed_last_40_tokens_include_system_allow_partial_start_on_human() -> None:
    out = seed_trim(
        max_tokens=40,
        strategy="last",
        include_system=True,
        allow_partial=True,
        start_on="human",
    )
    assert out == [
        SystemMessage(TEXT),
        HumanMessage(TEXT, id="third"),
        AIMessage(TEXT, id="fourth"),
    ]


# -- shapes ---------------------------------------------------------------------------


def _words(message: Mapping[str, Any] | BaseMessage) -> int:
    content = message_content(message)
    text = content if isinstance(content, str) else json.dumps(content)
    return 1 + len(text.split())


def _conversation() -> list[Any]:
    return [
        SystemMessage("be brief", id="s"),
        HumanMessage("first question here", id="h1"),
        AIMessage("a fairly long first answer\nwith a second line", id="a1"),
        HumanMessage("second question", id="h2"),
        AIMessage("short answer", id="a2"),
    ]


SERIALISERS = {
    "messages_to_dict": (messages_to_dict, messages_from_dict),
    "dumpd": (lambda ms: [dumpd(m) for m in ms], None),
}


@pytest.mark.parametrize("form", ["messages_to_dict", "dumpd"])
@pytest.mark.parametrize("allow_partial", [False, True])
def test_serialised_dicts_trim_like_the_objects(form: str, allow_partial: bool) -> None:
    objects = _conversation()
    dicts = SERIALISERS[form][0](objects)
    for budget in range(0, 20):
        kept_objects = trim_messages(
            objects, max_tokens=budget, token_counter=_words, allow_partial=allow_partial
        )
        kept_dicts = trim_messages(
            dicts, max_tokens=budget, token_counter=_words, allow_partial=allow_partial
        )
        assert [message_id(m) for m in kept_dicts] == [message_id(m) for m in kept_objects]
        assert [message_content(m) for m in kept_dicts] == [
            message_content(m) for m in kept_objects
        ]
        assert all(isinstance(m, dict) for m in kept_dicts)


def test_whole_messages_are_the_originals_and_partials_are_copies() -> None:
    history = [
        {"role": "user", "content": "one\ntwo\nthree", "id": "u", "name": "bob"},
        {"role": "assistant", "content": "ok", "id": "a"},
    ]
    snapshot = copy.deepcopy(history)
    out = trim_messages(history, max_tokens=5, token_counter=_words, allow_partial=True)
    assert out[-1] is history[-1]
    assert out[0] == {"role": "user", "content": "two\nthree", "id": "u", "name": "bob"}
    assert history == snapshot


def test_partial_anthropic_blocks_and_text_fallback() -> None:
    message = {
        "role": "assistant",
        "id": "a",
        "content": [
            {"type": "text", "text": "alpha beta\ngamma delta"},
            {"type": "text", "text": "epsilon zeta eta theta iota"},
        ],
    }

    def blocks(m: Mapping[str, Any]) -> int:
        content = m["content"]
        return (
            sum(len(b["text"].split()) for b in content)
            if isinstance(content, list)
            else (len(content.split()))
        )

    first = trim_messages(
        [message], max_tokens=4, token_counter=blocks, strategy="first", allow_partial=True
    )
    assert first == [{**message, "content": [message["content"][0]]}]
    # No whole block fits: the first block's text is split, keeping leading lines.
    first = trim_messages(
        [message], max_tokens=3, token_counter=blocks, strategy="first", allow_partial=True
    )
    assert first == [{**message, "content": "alpha beta\n"}]
    # "last" keeps leading whole blocks too, as the documented examples show.
    last = trim_messages([message], max_tokens=4, token_counter=blocks, allow_partial=True)
    assert last == [{**message, "content": [message["content"][0]]}]
    # No whole block fits: the last block's text is split, keeping trailing lines; its
    # single line cannot split, so nothing is kept.
    last = trim_messages([message], max_tokens=3, token_counter=blocks, allow_partial=True)
    assert last == []


class _Splitter:
    """A stand-in for a LangChain ``TextSplitter``: only ``split_text`` is used."""

    def split_text(self, text: str) -> list[str]:
        return [text[i : i + 4] for i in range(0, len(text), 4)]


def test_text_splitter_object_and_callable() -> None:
    history = [HumanMessage("abcdefghij", id="h")]

    def chars(m: BaseMessage) -> int:
        return len(m.content)

    out = trim_messages(
        history, max_tokens=6, token_counter=chars, allow_partial=True, text_splitter=_Splitter()
    )
    assert [m.content for m in out] == ["efghij"]
    out = trim_messages(
        history,
        max_tokens=6,
        token_counter=chars,
        strategy="first",
        allow_partial=True,
        text_splitter=lambda s: list(s),
    )
    assert [m.content for m in out] == ["abcdef"]


def test_prompt_value_like_input() -> None:
    class Prompt:
        def to_messages(self) -> list[Any]:
            return _conversation()

    out = trim_messages(Prompt(), max_tokens=2, token_counter=len)
    assert [m.id for m in out] == ["h2", "a2"]


def test_empty_and_everything_fits() -> None:
    assert trim_messages([], max_tokens=10, token_counter=len) == []
    history = _conversation()
    out = trim_messages(history, max_tokens=10**9, token_counter="approximate")
    assert out == history and out is not history
    assert trim_messages(history, max_tokens=-1, token_counter=len) == []


def test_include_system_keeps_an_oversized_system_message() -> None:
    history = _conversation()
    assert trim_messages(history, max_tokens=0, token_counter=len, include_system=True) == [
        history[0]
    ]


def test_role_aliases_classes_and_dicts_in_start_on_end_on() -> None:
    history = [
        {"role": "system", "content": "s", "id": "s"},
        {"role": "user", "content": "q1", "id": "h1"},
        {"role": "assistant", "content": "a1", "id": "a1"},
        {"role": "user", "content": "q2", "id": "h2"},
    ]
    for spec in ("human", "user", HumanMessage, ["user"], ("tool", HumanMessage)):
        out = trim_messages(history, max_tokens=2, token_counter=len, start_on=spec)
        assert [m["id"] for m in out] == ["h2"]
        out = trim_messages(history, max_tokens=9, token_counter=len, strategy="first", end_on=spec)
        assert [m["id"] for m in out] == ["s", "h1", "a1", "h2"]
    out = trim_messages(history, max_tokens=9, token_counter=len, end_on=AIMessage)
    assert [m["id"] for m in out] == ["s", "h1", "a1"]
    objects = [SystemMessage("s"), HumanMessage("q"), AIMessage("a")]
    assert trim_messages(objects, max_tokens=9, token_counter=len, end_on=HumanMessage) == [
        objects[0],
        objects[1],
    ]


# -- token counters -------------------------------------------------------------------


def _per_message_recorder(kind: str) -> tuple[Any, list[Any]]:
    seen: list[Any] = []

    def base(message: BaseMessage) -> int:
        seen.append(message)
        return 1

    def ai_only(message: AIMessage) -> int:
        seen.append(message)
        return 1

    def mapping(message: Mapping[str, Any] | BaseMessage) -> int:
        seen.append(message)
        return 1

    def forward(message: NotDefinedAnywhere) -> int:  # type: ignore[name-defined]  # noqa: F821
        seen.append(message)
        return 1

    class Counter:
        def __call__(self, message: BaseMessage) -> int:
            seen.append(message)
            return 1

    def two(message: BaseMessage, extra: int = 0) -> int:
        seen.append(message)
        return 1 + extra

    counters = {
        "BaseMessage": base,
        "AIMessage": ai_only,
        "union": mapping,
        "unresolvable": forward,
        "callable object": Counter(),
        "partial": functools.partial(two, extra=0),
    }
    return counters[kind], seen


@pytest.mark.parametrize(
    "kind", ["BaseMessage", "AIMessage", "union", "unresolvable", "callable object", "partial"]
)
def test_single_message_counters_are_detected_by_annotation(kind: str) -> None:
    counter, seen = _per_message_recorder(kind)
    history = _conversation()
    assert trim_messages(history, max_tokens=2, token_counter=counter) == history[-2:]
    assert seen and not any(isinstance(m, list) for m in seen)


def _list_recorder(kind: str) -> tuple[Any, list[Any]]:
    seen: list[Any] = []

    def unannotated(messages):  # type: ignore[no-untyped-def]
        seen.append(messages)
        return len(messages)

    def as_list(messages: list[BaseMessage]) -> int:
        seen.append(messages)
        return len(messages)

    def as_sequence(messages: Sequence[Any]) -> int:
        seen.append(messages)
        return len(messages)

    def as_any(messages: Any) -> int:
        seen.append(messages)
        return len(messages)

    def as_text(messages: list[NotDefined]) -> int:  # type: ignore[name-defined]  # noqa: F821
        seen.append(messages)
        return len(messages)

    counters = {
        "unannotated": unannotated,
        "list": as_list,
        "Sequence": as_sequence,
        "Any": as_any,
        "unresolvable list": as_text,
        "lambda": lambda ms: seen.append(ms) or len(ms),
    }
    return counters[kind], seen


@pytest.mark.parametrize(
    "kind", ["unannotated", "list", "Sequence", "Any", "unresolvable list", "lambda"]
)
def test_list_counters_get_lists(kind: str) -> None:
    counter, seen = _list_recorder(kind)
    history = _conversation()
    assert trim_messages(history, max_tokens=2, token_counter=counter) == history[-2:]
    assert seen and all(isinstance(m, list) for m in seen)


def test_len_counts_messages() -> None:
    history = _conversation()
    out = trim_messages(history, max_tokens=3, token_counter=len, include_system=True)
    assert out == [history[0], *history[-2:]]


def _long_history(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}", "id": f"m{i}"}
        for i in range(n)
    ]


@pytest.mark.parametrize("strategy", ["first", "last"])
def test_per_message_counter_counts_only_what_it_needs(strategy: str) -> None:
    calls: list[Any] = []

    def count(message: Mapping[str, Any]) -> int:
        calls.append(message)
        return 10

    history = _long_history(1000)
    out = trim_messages(history, max_tokens=100, token_counter=count, strategy=strategy)
    assert len(out) == 10
    assert len(calls) == 11  # the ten kept and the one that did not fit
    assert len({id(m) for m in calls}) == len(calls)


@pytest.mark.parametrize("strategy", ["first", "last"])
def test_list_counter_is_called_a_logarithmic_number_of_times(strategy: str) -> None:
    calls: list[int] = []

    def count(messages):  # type: ignore[no-untyped-def]
        calls.append(len(messages))
        return 10 * len(messages)

    history = _long_history(4096)
    out = trim_messages(history, max_tokens=1000, token_counter=count, strategy=strategy)
    assert len(out) == 100
    assert len(calls) <= 2 * 12 + 2
    assert max(calls) <= 2 * 100  # galloping never builds lists far past the answer


def test_chat_model_and_approximate_and_none_counters() -> None:
    class Model:
        def get_num_tokens_from_messages(self, messages: list[Any]) -> int:
            return 7 * len(messages)

    history = _conversation()
    assert trim_messages(history, max_tokens=14, token_counter=Model()) == history[-2:]
    short = trim_messages(history, max_tokens=25, token_counter="approximate")
    assert 0 < len(short) < len(history)
    default = resolve_token_counter(None)
    assert trim_messages(history, max_tokens=25, token_counter=None) == trim_messages(
        history, max_tokens=25, token_counter=lambda ms: sum(default(m) for m in ms)
    )


# -- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"strategy": "middle"}, "strategy"),
        ({"strategy": "first", "start_on": "human"}, "start_on"),
        ({"strategy": "first", "include_system": True}, "include_system"),
        ({"token_counter": "exact"}, "token_counter"),
        ({"token_counter": 3}, "token_counter"),
    ],
)
def test_value_errors_name_the_argument(kwargs: dict[str, Any], names: str) -> None:
    params: dict[str, Any] = {"max_tokens": 5, "token_counter": len, **kwargs}
    with pytest.raises(ConfigError, match=names) as info:
        trim_messages(_conversation(), **params)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("args", "kwargs", "names"),
    [
        ("hello", {}, "messages"),
        ({"role": "user", "content": "hi"}, {}, "messages"),
        ([], {"max_tokens": None}, "max_tokens"),
        ([], {"start_on": 5}, "start_on"),
        ([], {"end_on": ["human", 5]}, "end_on"),
        ([], {"allow_partial": True, "text_splitter": 5}, "text_splitter"),
    ],
)
def test_type_errors_name_the_argument(args: Any, kwargs: dict[str, Any], names: str) -> None:
    params: dict[str, Any] = {"max_tokens": 5, "token_counter": len, **kwargs}
    with pytest.raises(TypeError, match=names):
        trim_messages(args, **params)


@pytest.mark.parametrize(
    ("args", "kwargs", "names"),
    [
        (5, {}, "messages"),
        ([], {"max_tokens": "10"}, "max_tokens"),
        ([], {"max_tokens": True}, "max_tokens"),
        ([], {"token_counter": object()}, "token_counter"),
        ([], {"strategy": 1}, "strategy"),
        ([], {"include_system": "yes"}, "include_system"),
        ([], {"allow_partial": 1}, "allow_partial"),
        ([], {"keep_tool_pairs": None}, "keep_tool_pairs"),
        ([], {"start_on": b"human"}, "start_on"),
        ([], {"end_on": {"role": "ai"}}, "end_on"),
        ([], {"text_splitter": 5}, "text_splitter"),  # checked even without allow_partial
    ],
)
def test_wrong_types_raise_config_type_error_naming_the_argument(
    args: Any, kwargs: dict[str, Any], names: str
) -> None:
    params: dict[str, Any] = {"max_tokens": 5, "token_counter": len, **kwargs}
    # LangChain's words quote the argument: 'token_counter' expected to be ...
    with pytest.raises(ConfigTypeError, match=rf"^'?{names}\b") as info:
        trim_messages(args, **params)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"max_tokens": float("nan")}, "max_tokens"),
        ({"start_on": "humn"}, "start_on"),
        ({"end_on": ["ai", "robot"]}, "end_on"),
    ],
)
def test_wrong_values_raise_config_error_naming_the_argument(
    kwargs: dict[str, Any], names: str
) -> None:
    params: dict[str, Any] = {"max_tokens": 5, "token_counter": len, **kwargs}
    with pytest.raises(ConfigError, match=rf"^'?{names}\b") as info:
        trim_messages(_conversation(), **params)
    assert not isinstance(info.value, TypeError)


def test_arguments_are_checked_before_any_message_is_read() -> None:
    with pytest.raises(ConfigError, match="strategy"):
        trim_messages([42], max_tokens=5, token_counter=len, strategy="middle")


def test_none_is_an_empty_history_as_for_reduce() -> None:
    assert trim_messages(None, max_tokens=5, token_counter=len) == []
    assert MessageReducer().reduce(None).surviving == []


def test_edge_values_that_are_valid_still_work() -> None:
    history = _conversation()
    assert trim_messages(history, max_tokens=0, token_counter=len) == []
    assert trim_messages(history, max_tokens=float("inf"), token_counter=len) == history
    assert trim_messages(history, max_tokens=2.5, token_counter=len) == history[-2:]


def test_unreadable_message_names_its_index() -> None:
    with pytest.raises(MessageFormatError, match="index 1"):
        trim_messages(
            [{"role": "user", "content": "a"}, 42], max_tokens=5, token_counter="approximate"
        )


# -- tool pairs -------------------------------------------------------------------------


def _tool_round(shape: str) -> list[Any]:
    """system, question, ai calling c1 and c2, their results, final answer, question."""
    return [
        system(shape, "sys", "s"),
        human(shape, "question one", "h1"),
        ai(shape, "", "a1", ["c1", "c2"]),
        *results(shape, ["c1", "c2"], "t"),
        ai(shape, "the answer", "a2"),
        human(shape, "question two", "h2"),
    ]


def _ids(messages: list[Any]) -> list[str | None]:
    return [message_id(m) for m in messages]


@pytest.mark.parametrize("shape", ["openai", "langchain"])
def test_last_never_starts_with_an_orphaned_result(shape: str) -> None:
    history = _tool_round(shape)  # s h1 a1 t-0 t-1 a2 h2
    raw = trim_messages(history, max_tokens=3, token_counter=len, keep_tool_pairs=False)
    assert _ids(raw) == ["t-1", "a2", "h2"]  # LangChain's output starts with a result
    assert _ids(trim_messages(history, max_tokens=3, token_counter=len)) == ["a2", "h2"]
    assert _ids(trim_messages(history, max_tokens=4, token_counter=len)) == ["a2", "h2"]
    assert _ids(trim_messages(history, max_tokens=5, token_counter=len)) == [
        "a1",
        "t-0",
        "t-1",
        "a2",
        "h2",
    ]


@pytest.mark.parametrize("shape", ["openai", "langchain"])
def test_first_never_ends_with_a_call_whose_results_were_cut(shape: str) -> None:
    history = _tool_round(shape)
    raw = trim_messages(
        history, max_tokens=4, token_counter=len, strategy="first", keep_tool_pairs=False
    )
    assert _ids(raw) == ["s", "h1", "a1", "t-0"]
    assert _ids(trim_messages(history, max_tokens=4, token_counter=len, strategy="first")) == [
        "s",
        "h1",
    ]
    assert _ids(trim_messages(history, max_tokens=5, token_counter=len, strategy="first")) == [
        "s",
        "h1",
        "a1",
        "t-0",
        "t-1",
    ]


def test_anthropic_tool_result_turns_count_as_results() -> None:
    history = _tool_round("anthropic")  # s h1 a1 t(user with both results) a2 h2
    assert _ids(history) == ["s", "h1", "a1", "t", "a2", "h2"]
    raw = trim_messages(history, max_tokens=3, token_counter=len, keep_tool_pairs=False)
    assert _ids(raw) == ["t", "a2", "h2"]
    assert _ids(trim_messages(history, max_tokens=3, token_counter=len)) == ["a2", "h2"]
    first = trim_messages(history, max_tokens=3, token_counter=len, strategy="first")
    assert _ids(first) == ["s", "h1"]


def test_partial_anthropic_call_that_loses_its_tool_use_block() -> None:
    caller = {
        "role": "assistant",
        "id": "a1",
        "content": [
            {"type": "text", "text": "let me look"},
            {"type": "tool_use", "id": "c1", "name": "lookup", "input": {}},
        ],
    }
    answer = {
        "role": "user",
        "id": "t1",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "found"}],
    }
    history = [{"role": "user", "content": "q", "id": "h1"}, caller, answer]

    def blocks(message: Mapping[str, Any]) -> int:
        content = message["content"]
        return len(content) if isinstance(content, list) else 1

    # "last" keeps the leading text block: the call left with its tool_use block, so its
    # result goes too (keep_tool_pairs) rather than answer a call no longer made.
    out = trim_messages(history, max_tokens=2, token_counter=blocks, allow_partial=True)
    assert out == [{**caller, "content": [caller["content"][0]]}]
    assert read_message(out[0]).calls == ()
    out = trim_messages(
        history, max_tokens=2, token_counter=blocks, allow_partial=True, keep_tool_pairs=False
    )
    assert out == [{**caller, "content": [caller["content"][0]]}, answer]
    # "first" keeps the leading text block: the call left with its block, so the shorter
    # message issues no call and the result is valid as it is.
    out = trim_messages(
        history, max_tokens=2, token_counter=blocks, strategy="first", allow_partial=True
    )
    assert out == [history[0], {**caller, "content": [caller["content"][0]]}]
    assert read_message(out[1]).calls == ()


def test_pending_calls_are_kept_and_input_orphans_dropped() -> None:
    pending = [
        {"role": "user", "content": "q", "id": "h"},
        {
            "role": "assistant",
            "content": None,
            "id": "a",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]
    # The call is still running (no result exists anywhere): nothing was cut.
    assert trim_messages(pending, max_tokens=1, token_counter=len) == pending[1:]
    orphan = [{"role": "tool", "tool_call_id": "gone", "content": "r", "id": "t"}, *pending[:1]]
    assert trim_messages(orphan, max_tokens=9, token_counter=len) == orphan[1:]
    assert trim_messages(orphan, max_tokens=9, token_counter=len, keep_tool_pairs=False) == orphan


def test_end_on_is_reapplied_after_a_pair_is_dropped() -> None:
    history = _tool_round("openai")[:5]  # s h1 a1 t-0 t-1
    raw = trim_messages(
        history, max_tokens=9, token_counter=len, end_on="ai", keep_tool_pairs=False
    )
    assert _ids(raw) == ["s", "h1", "a1"]
    out = trim_messages(history, max_tokens=9, token_counter=len, end_on="ai")
    assert out == []  # the only ai message would end with unanswered calls


def test_start_on_is_reapplied_after_a_pair_is_dropped() -> None:
    history = _tool_round("openai")
    out = trim_messages(history, max_tokens=4, token_counter=len, start_on=["tool", "human"])
    assert _ids(out) == ["h2"]


# -- laws -------------------------------------------------------------------------------


def _size(message: Mapping[str, Any] | BaseMessage) -> int:
    return 2 + len(repr(message_content(message)))


@st.composite
def trim_cases(draw: st.DrawFn) -> tuple[list[Any], dict[str, Any]]:
    history = draw(histories(max_turns=6))
    strategy = draw(st.sampled_from(["first", "last"]))
    types = st.sampled_from([None, "human", "ai", "tool", ["human", "system"], [AIMessage]])
    params: dict[str, Any] = {
        "strategy": strategy,
        "allow_partial": draw(st.booleans()),
        "end_on": draw(types),
        "max_tokens": draw(st.integers(0, sum(_size(m) for m in history) + 5)),
    }
    if strategy == "last":
        params["include_system"] = draw(st.booleans())
        params["start_on"] = draw(types)
    return history, params


def _approximate_each(message: Mapping[str, Any] | BaseMessage) -> int:
    """The heuristic as a user's counter over one message, counted one message at a time."""
    return approximate_token_count(message)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(trim_cases(), st.floats(0, 1.2), st.booleans())
def test_the_built_in_counter_keeps_what_counting_each_message_keeps(
    case: tuple[list[Any], dict[str, Any]], share: float, forget: bool
) -> None:
    # "approximate" reads and counts the kept messages in one loop (tokens.count_back,
    # the reader's LangChain shortcut, the memo looked up in place); the same heuristic
    # as a callable is read and counted one message at a time, by the general loop.
    history, params = case
    params["max_tokens"] = round(share * sum(approximate_token_count(m) for m in history))
    if forget:
        _approximate_o200k.forget()  # texts seen for the first time
    fast = trim_selection(history, token_counter="approximate", **params)
    each = trim_selection(history, token_counter=_approximate_each, **params)
    assert fast == each == trim_selection(history, token_counter="approximate", **params)


@settings(max_examples=200, deadline=None)
@given(histories() | responses_histories(), st.data())
def test_a_run_is_closed_exactly_when_no_split_pair_is_dropped_from_it(
    history: list[Any], data: st.DataObject
) -> None:
    from agentstate_reducer.plan import link_calls
    from agentstate_reducer.trim import _closed, _drop_split_pairs, _units_around, _Views

    lo = data.draw(st.integers(0, len(history)))
    hi = data.draw(st.integers(lo, len(history)))
    views = _Views(history)
    kept = list(enumerate(history))[lo:hi]
    parents, results = link_calls(views, lo, hi, results=True)
    units = _units_around(views, len(history), lo, hi)
    # A copy of no kept message: the whole loop runs, as with a partial message.
    other = {len(history): read_message({"role": "user", "content": "x"})}
    whole = _drop_split_pairs(kept, views, parents, results, other, units)
    assert _closed(lo, hi, parents, results, units) == (whole == kept)
    assert _drop_split_pairs(kept, views, parents, results, {}, units) == whole


def _source(history: list[Any], kept: list[Any]) -> list[int]:
    """The input index each kept message stands for (a partial copy: by its id)."""
    by_identity = {id(m): i for i, m in enumerate(history)}
    by_id = {message_id(m): i for i, m in enumerate(history)}
    return [by_identity.get(id(m), by_id[message_id(m)]) for m in kept]


def _issuers(history: list[Any]) -> dict[tuple[int, str], int]:
    issued: dict[str, int] = {}
    parent: dict[tuple[int, str], int] = {}
    for j, m in enumerate(history):
        view = read_message(m)
        for call in view.answers:
            if call in issued:
                parent[(j, call)] = issued[call]
        for call in view.calls:
            issued[call] = j
    return parent


@pytest.mark.slow
@settings(max_examples=250, deadline=None)
@given(trim_cases())
def test_laws(case: tuple[list[Any], dict[str, Any]]) -> None:
    history, params = case
    snapshot = copy.deepcopy(history)
    kept = trim_messages(history, token_counter=_size, **params)
    raw = trim_messages(history, token_counter=_size, keep_tool_pairs=False, **params)
    assert history == snapshot
    at, raw_at = _source(history, kept), _source(history, raw)
    # An order-preserving selection, within LangChain's selection.
    assert at == sorted(set(at))
    assert set(at) <= set(raw_at)
    # The budget holds, except for a system message kept by include_system.
    total = sum(_size(m) for m in kept)
    if total > params["max_tokens"]:
        assert params.get("include_system") and kept == [history[0]]
        assert read_message(history[0]).role == "system"
    # No tool result without its call, no call without a result that was cut.
    views = {i: read_message(m) for i, m in zip(at, kept, strict=True)}
    parents = _issuers(history)
    for j, view in views.items():
        for call in view.answers:
            p = parents.get((j, call))
            assert p is not None and call in views.get(p, read_message({})).calls
    for (j, call), p in parents.items():
        if p in views and call in views[p].calls:
            assert j in views and call in views[j].answers
    # start_on / end_on hold for what follows the kept system message.
    system_kept = (
        bool(params.get("include_system"))
        and at[:1] == [0]
        and read_message(history[0]).role == "system"
    )
    body = kept[1:] if system_kept else kept
    unbounded: dict[str, Any] = {"max_tokens": 10**9, "token_counter": len}
    if body and params["end_on"]:
        assert trim_messages(body, end_on=params["end_on"], **unbounded) == body
    if body and params.get("start_on"):
        assert trim_messages(body, start_on=params["start_on"], **unbounded) == body
    # Idempotence, except that a lone system message kept by include_system is then
    # subject to end_on (LangChain applies end_on before setting the system message aside).
    if body or not system_kept:
        assert trim_messages(kept, token_counter=_size, **params) == kept


def test_message_content_and_with_content_on_every_shape() -> None:
    objects = [HumanMessage("hi", id="h", name="bob"), AIMessage([{"type": "text", "text": "x"}])]
    shapes: list[list[Any]] = [
        objects,
        messages_to_dict(objects),
        [dumpd(m) for m in objects],
        [{"role": "user", "content": "hi", "id": "h", "name": "bob"}],
    ]
    for messages in shapes:
        for message in messages:
            before = copy.deepcopy(message)
            new_content = [{"type": "text", "text": "replaced"}]
            copied = with_content(message, new_content)
            assert message_content(copied) == new_content
            assert message_content(copied) is not new_content
            assert message == before
            assert type(copied) is type(message)
            assert message_id(copied) == message_id(message)
            assert read_message(copied).role == read_message(message).role


_AGENT_REDUCER = MessageReducer(
    config=ReducerConfig(min_messages=6, max_messages=10, preserve_first=False)
)


class _AgentTestState(AgentState):  # type: ignore[type-arg]
    messages: Annotated[list[Any], _AGENT_REDUCER.as_langgraph_reducer()]


def test_model_sees_the_trim_and_state_keeps_the_reduced_history() -> None:
    """docs/trim.md: trim in a model-call middleware, bound the stored state with a reducer."""
    seen: list[list[Any]] = []

    class Model(GenericFakeChatModel):
        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            seen.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    @wrap_model_call  # type: ignore[arg-type]
    def fit_context(request: Any, handler: Any) -> Any:
        window = trim_messages(request.messages, max_tokens=3, token_counter=len, start_on="human")
        return handler(request.override(messages=window))

    model = Model(messages=iter([AIMessage(f"answer {i}", id=f"a{i}") for i in range(20)]))
    agent = create_agent(
        model,
        tools=[],
        middleware=[fit_context],
        state_schema=_AgentTestState,
        checkpointer=InMemorySaver(),
        system_prompt="be brief",
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for i in range(8):
        out = agent.invoke({"messages": [HumanMessage(f"q{i}", id=f"q{i}")]}, config)
    stored = [m.content for m in out["messages"]]
    assert stored == ["q5", "answer 5", "q6", "answer 6", "q7", "answer 7"]
    assert [m.content for m in seen[-1]] == ["be brief", "q6", "answer 6", "q7"]
    assert all(len(call) <= 4 for call in seen)


@given(
    histories(),
    st.integers(0, 400),
    st.sampled_from(["first", "last"]),
    st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_trim_selection_names_the_input_index_of_each_kept_message(
    messages: list[Any], budget: int, strategy: str, allow_partial: bool
) -> None:
    from agentstate_reducer.trim import trim_selection

    options: dict[str, Any] = {
        "max_tokens": budget,
        "token_counter": "approximate",
        "strategy": strategy,
        "allow_partial": allow_partial,
    }
    selection = trim_selection(messages, **options)
    indices = [i for i, _ in selection.kept]
    assert indices == sorted(set(indices))
    assert [m for _, m in selection.kept] == trim_messages(messages, **options)
    for i, message in selection.kept:
        assert (message is messages[i]) == (i not in selection.partial)


def test_trim_selection_takes_the_options_of_trim_messages_with_their_defaults() -> None:
    """Both signatures are public and written out: this keeps them one list."""
    from agentstate_reducer.trim import trim_selection

    def options(fn: Any) -> list[inspect.Parameter]:
        return list(inspect.signature(fn).parameters.values())[1:]  # after ``messages``

    assert options(trim_selection) == options(trim_messages)


_link_ids = st.lists(st.sampled_from("abc"), max_size=2, unique=True).map(tuple)
_link_views = st.lists(
    st.one_of(
        st.builds(lambda c: MessageRecord("ai", None, c, ()), _link_ids),
        st.builds(lambda a: MessageRecord("tool", None, (), a), _link_ids),
        st.just(MessageRecord("human", None, (), ())),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(_link_views, st.data())
def test_link_calls_told_which_messages_link_agrees_with_finding_them(
    views: list[MessageRecord], data: st.DataObject
) -> None:
    # What trim hands link_calls from count_back: the run's messages that issue or answer.
    from agentstate_reducer.plan import link_calls

    start = data.draw(st.integers(0, len(views)))
    stop = data.draw(st.integers(start, len(views)))
    linking = [j for j in range(start, stop) if views[j].calls or views[j].answers]
    for found in (True, False):
        assert link_calls(views, start, stop, results=found, linking=linking) == link_calls(
            views, start, stop, results=found
        )


@settings(max_examples=100, deadline=None)
@given(history=histories(), budget=st.integers(0, 3_000))
def test_trim_counting_back_notes_the_messages_that_link(history: list[Any], budget: int) -> None:
    from agentstate_reducer.trim import _Sizer, _Views

    views = _Views(history)
    sizer = _Sizer(history, views, "approximate")
    lo, _ = sizer.back(len(history), 0, 0, budget)
    for a in range(lo, len(history) + 1):
        for b in range(a, len(history) + 1):
            linking = sizer.linking(a, b)
            assert linking == [j for j in range(a, b) if views[j].calls or views[j].answers]


@settings(max_examples=200, deadline=None)
@given(history=histories() | responses_histories(), data=st.data())
def test_units_around_a_run_with_no_group_inside_are_read_at_its_ends(
    history: list[Any], data: st.DataObject
) -> None:
    from agentstate_reducer.read import GROUP_NONE, record_group
    from agentstate_reducer.trim import _units_around, _Views

    views = _Views(history)
    n = len(history)
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    inside = any(record_group(views[j]) != GROUP_NONE for j in range(start, stop))
    assert _units_around(views, n, start, stop, inside) == _units_around(views, n, start, stop)


@settings(max_examples=100, deadline=None)
@given(history=histories() | responses_histories(), budget=st.integers(0, 3_000))
def test_trim_counting_back_notes_the_messages_that_group(
    history: list[Any], budget: int
) -> None:
    from agentstate_reducer.read import GROUP_NONE, record_group
    from agentstate_reducer.trim import _Sizer, _Views

    views = _Views(history)
    sizer = _Sizer(history, views, "approximate")
    lo, _ = sizer.back(len(history), 0, 0, budget)
    for a in range(lo, len(history) + 1):
        for b in range(a, len(history) + 1):
            groups = [record_group(read_message(history[j])) for j in range(a, b)]
            assert sizer.groups(a, b) == any(g != GROUP_NONE for g in groups)
