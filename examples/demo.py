"""The whole system: a LangGraph agent for 200 turns, with and without the reducer, side by side.

A scripted chat model (no network, no API key) answers with tool calls; three threads run
the same script: one saved by a plain checkpointer, one by ``ReducingSaver``, whose
pruned messages go to long-term memory in a store through ``store_hook``, and one by
``ReducingSaver(..., keep_checkpoints=10)``, which also deletes all but the thread's
newest checkpoints. At the end the demo prints what each thread stored, checks that every
pruned message reached long-term memory exactly once, shows the last window the model
saw, and draws storage per turn.

Run ``make demo``, or ``.venv/bin/python examples/demo.py --turns 50``. SQLite files go to
``--out-dir`` (default ``demo-output/``); with ``DATABASE_URL=postgresql://...`` the same
runs on ``PostgresSaver`` and ``PostgresStore``. The SQLite files, or the PostgreSQL
threads, are removed afterwards unless ``--keep``; the chart and the transcript stay.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import sqlite3
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import Field

from agentstate_reducer import MessageReducer, ReducerConfig, resolve_token_counter
from agentstate_reducer.langgraph import ReducingSaver, memory_namespace, store_hook

SYSTEM_PROMPT = "You are a travel assistant. Use the tools for facts; answer in one sentence."
# The reducer of the demo: keep the last 20 messages once there are more than 40, keep the
# system prompt, and start the kept part on a user turn.
CONFIG = {"max_messages": 40, "min_messages": 20, "start_on": "human"}
# Retention: the newest checkpoints a thread keeps (about the last two turns).
KEEP_CHECKPOINTS = 10

# -- the script: what the user asks, and which tools the model calls -------------------

CITIES = ["Lisbon", "Berlin", "Kyoto", "Lima", "Oslo", "Nairobi", "Austin", "Hanoi"]
DAYS = ["today", "tomorrow", "Friday", "Sunday"]
RATES = {"EUR": 1.0, "USD": 1.08, "JPY": 162.0, "GBP": 0.85}


@dataclass(frozen=True)
class Turn:
    question: str
    #: ``(tool name, arguments)`` the model calls, in one parallel step; empty: no tools.
    calls: tuple[tuple[str, dict[str, Any]], ...]


def script(turn: int) -> Turn:
    """Turn ``turn`` (from 1) of the conversation; the same every run."""
    city, other = CITIES[turn % len(CITIES)], CITIES[(turn * 3 + 1) % len(CITIES)]
    day = DAYS[turn % len(DAYS)]
    if turn % 6 == 0:
        return Turn(f"Thanks, that helps (turn {turn}).", ())
    if turn % 4 == 0:
        return Turn(
            f"Compare the weather in {city} and {other} {day} (turn {turn}).",
            (("get_weather", {"city": city, "day": day}),
             ("get_weather", {"city": other, "day": day})),
        )
    if turn % 3 == 0:
        amount = 50 * (turn % 7 + 1)
        return Turn(
            f"How much is {amount} EUR in JPY (turn {turn})?",
            (("convert_currency", {"amount": amount, "source": "EUR", "target": "JPY"}),),
        )
    return Turn(
        f"What should I see in {city}, and how is the weather {day} (turn {turn})?",
        (("search_guide", {"city": city}), ("get_weather", {"city": city, "day": day})),
    )


def _digest(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:8], 16)


def get_weather(city: str, day: str) -> str:
    n = _digest(city, day)
    forecast = ["sunny", "cloudy", "rain", "windy", "snow"][n % 5]
    return json.dumps({"city": city, "day": day, "forecast": forecast, "high_c": 5 + n % 25})


def convert_currency(amount: float, source: str, target: str) -> str:
    value = round(amount * RATES[target] / RATES[source], 2)
    return json.dumps({"amount": amount, "from": source, "to": target, "result": value})


def search_guide(city: str) -> str:
    # Guide pages are long, as real tool output is: most of the bytes an agent stores.
    sights = [f"{city} sight #{_digest(city, i) % 97}" for i in range(12)]
    return json.dumps({"city": city, "top_sights": sights, "notes": f"{city} guide. " * 20})


TOOLS: dict[str, Callable[..., str]] = {
    "get_weather": get_weather,
    "convert_currency": convert_currency,
    "search_guide": search_guide,
}


class ScriptedChatModel(BaseChatModel):
    """A chat model that follows :func:`script`: no network, no API key, same answers."""

    #: Length of every window the model was called with.
    windows: list[int] = Field(default_factory=list)
    #: The messages of the last call.
    last_window: list[BaseMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.windows.append(len(messages))
        self.last_window = list(messages)
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            results = []
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                results.append(json.loads(str(message.content)))
            facts = "; ".join(
                ", ".join(f"{k}={v}" for k, v in r.items() if k != "notes" and k != "top_sights")
                for r in reversed(results)
            )
            return AIMessage(f"Here is what I found: {facts}.")
        found = re.search(r"\(turn (\d+)\)", str(last.content))
        number = int(found[1]) if found else 0
        calls = script(number).calls if number else ()
        if not calls:
            return AIMessage("Glad to help. Anything else for the trip?")
        return AIMessage("", tool_calls=[
            {"name": name, "args": args, "id": f"call_{number}_{k}", "type": "tool_call"}
            for k, (name, args) in enumerate(calls)
        ])


# -- the agent -------------------------------------------------------------------------


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_agent(model: ScriptedChatModel, checkpointer: Any) -> Any:
    """A two-node tool-calling agent: the model, then the tools it asked for, until it answers."""

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(TOOLS[c["name"]](**c["args"]), tool_call_id=c["id"], name=c["name"])
                for c in last.tool_calls
            ]
        }

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


# -- storage: SQLite by default, PostgreSQL with DATABASE_URL ---------------------------


@dataclass
class Backend:
    name: str
    saver: Any
    store: Any
    #: ``thread_id -> bytes`` the checkpointer holds for the thread.
    stored_bytes: Callable[[str], int]
    where: str
    suffix: str = ""
    #: Files the backend writes (SQLite), removed after the run unless ``--keep``.
    files: tuple[Path, ...] = ()


_SQLITE_BYTES = (
    "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0)"
    " FROM checkpoints WHERE thread_id = ?)"
    " + (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?) AS bytes"
)
_POSTGRES_BYTES = (
    "SELECT (SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0)"
    " FROM checkpoints WHERE thread_id = %(t)s)"
    " + (SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM checkpoint_blobs WHERE thread_id = %(t)s)"
    " + (SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM checkpoint_writes WHERE thread_id = %(t)s)"
    " AS bytes"
)


@contextlib.contextmanager
def open_backend(out_dir: Path, database_url: str | None) -> Iterator[Backend]:
    with contextlib.ExitStack() as stack:
        if database_url:
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.store.postgres import PostgresStore

            saver = stack.enter_context(PostgresSaver.from_conn_string(database_url))
            store = stack.enter_context(PostgresStore.from_conn_string(database_url))
            saver.setup()
            store.setup()

            def pg_bytes(thread_id: str) -> int:
                with saver.conn.cursor() as cur:
                    cur.execute(_POSTGRES_BYTES, {"t": thread_id})
                    row = cur.fetchone()
                return int(row["bytes"] if isinstance(row, dict) else row[0])

            host = database_url.split("@")[-1]
            yield Backend("PostgreSQL", saver, store, pg_bytes, f"PostgreSQL at {host}",
                          suffix=f"-{uuid.uuid4().hex[:8]}")
            return
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [out_dir / "checkpoints.sqlite", out_dir / "memory.sqlite"]
        for path in paths:
            for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                stale.unlink(missing_ok=True)
        conn = stack.enter_context(
            contextlib.closing(sqlite3.connect(paths[0], check_same_thread=False))
        )
        saver = SqliteSaver(conn)
        store = stack.enter_context(SqliteStore.from_conn_string(str(paths[1])))
        store.setup()
        saver.setup()

        def sqlite_bytes(thread_id: str) -> int:
            return int(conn.execute(_SQLITE_BYTES, (thread_id, thread_id)).fetchone()[0])

        files = tuple(Path(f"{p}{end}") for p in paths for end in ("", "-wal", "-shm"))
        yield Backend("SQLite", saver, store, sqlite_bytes, f"{paths[0]} and {paths[1]}",
                      files=files)


# -- the run ---------------------------------------------------------------------------


@dataclass
class Thread:
    """One conversation thread: its agent, its model, and what it stored after each turn."""

    label: str
    agent: Any
    model: ScriptedChatModel
    config: dict[str, Any]
    bytes: list[int] = field(default_factory=list)
    messages: list[int] = field(default_factory=list)

    @property
    def thread_id(self) -> str:
        return str(self.config["configurable"]["thread_id"])

    def state(self) -> list[BaseMessage]:
        return list(self.agent.get_state(self.config).values["messages"])

    def step(self, new: list[BaseMessage], backend: Backend) -> None:
        self.agent.invoke({"messages": new}, self.config)
        self.bytes.append(backend.stored_bytes(self.thread_id))
        self.messages.append(len(self.state()))


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"


class Progress:
    """One line redrawn in place on a terminal; a line every tenth of the run otherwise."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.tty = sys.stdout.isatty()
        self.every = max(1, total // 10)
        self.start = time.perf_counter()

    def update(self, turn: int, text: str) -> None:
        line = f"turn {turn:>{len(str(self.total))}}/{self.total}  {text}"
        if self.tty:
            print(f"\r{line}", end="\n" if turn == self.total else "", flush=True)
        elif turn % self.every == 0 or turn == self.total:
            print(line, flush=True)

    def done(self) -> float:
        return time.perf_counter() - self.start


def run(turns: int, out_dir: Path, database_url: str | None, keep: bool = False) -> int:
    delivered: Counter[str] = Counter()

    def tally(pruned: list[Any], namespace: Any) -> None:
        delivered.update(str(m.id) for m in pruned)

    with open_backend(out_dir, database_url) as backend:
        reducer = MessageReducer(
            config=ReducerConfig(on_prune=[store_hook(backend.store), tally], **CONFIG)
        )
        plain_model, reduced_model = ScriptedChatModel(), ScriptedChatModel()
        plain = Thread(
            "without reducer", build_agent(plain_model, backend.saver), plain_model,
            {"configurable": {"thread_id": f"without-reducer{backend.suffix}"}},
        )
        reduced = Thread(
            "with reducer", build_agent(reduced_model, ReducingSaver(backend.saver, reducer)),
            reduced_model, {"configurable": {"thread_id": f"with-reducer{backend.suffix}"}},
        )
        # Its own reducer: what it prunes goes to its own namespace, apart from the tally.
        kept_model = ScriptedChatModel()
        kept_reducer = MessageReducer(
            config=ReducerConfig(on_prune=[store_hook(backend.store)], **CONFIG)
        )
        kept_saver = ReducingSaver(backend.saver, kept_reducer, keep_checkpoints=KEEP_CHECKPOINTS)
        retained = Thread(
            "+ retention", build_agent(kept_model, kept_saver), kept_model,
            {"configurable": {"thread_id": f"with-retention{backend.suffix}"}},
        )
        settings = ", ".join(f"{k}={v!r}" for k, v in CONFIG.items())
        print(f"Running a scripted LangGraph agent for {turns} turns on {backend.name}: one "
              f"thread saved as is, one through ReducingSaver({settings}), one through "
              f"ReducingSaver(..., keep_checkpoints={KEEP_CHECKPOINTS}).")
        progress = Progress(turns)
        for turn in range(1, turns + 1):
            new: list[BaseMessage] = [HumanMessage(script(turn).question)]
            if turn == 1:
                new.insert(0, SystemMessage(SYSTEM_PROMPT))
            plain.step(new, backend)
            reduced.step(new, backend)
            retained.step(new, backend)
            progress.update(turn, f"without: {plain.messages[-1]:>4} msgs "
                                  f"{_size(plain.bytes[-1]):>9} | with: {reduced.messages[-1]:>3}"
                                  f" msgs {_size(reduced.bytes[-1]):>9} | + retention: "
                                  f"{_size(retained.bytes[-1]):>9}")
        elapsed = progress.done()

        everything, kept = plain.state(), reduced.state()
        namespace = memory_namespace(reducer, reduced.config)
        memories = backend.store.search(namespace, limit=len(everything) + 100)
        problems = check_memory(everything, kept, delivered, memories)

        print(f"\n{turns} turns in {elapsed:.1f} s. Storage ({backend.where}):\n")
        print_side_by_side(plain, reduced, retained)
        print(f"\nPruned: {len(delivered)} of {len(everything)} messages left the window "
              f"({len(kept)} kept).")
        print(f"Long-term memory {namespace!r}: {len(memories)} items.")
        for problem in problems:
            print(f"  PROBLEM: {problem}")
        if not problems:
            print("  Each pruned message is in long-term memory exactly once, and window + "
                  "memory hold every message of the full conversation.")
        print_window(reduced_model.last_window)

        chart = out_dir / "storage.png"
        draw_chart(plain, reduced, retained, chart, backend.name)
        print(f"\nChart of storage per turn: {chart}")
        transcript = out_dir / "transcript.json"
        transcript.write_text(json.dumps(messages_to_dict(everything), indent=1) + "\n")
        print(f"The full conversation: {transcript}; see what the reducer would do to it with\n"
              f"  {_cli()} reduce {transcript} --max-messages 40 --min-messages 20 --explain")
        if backend.suffix and not keep:
            # A shared database: leave it as it was found.
            for thread in (plain, reduced, retained):
                backend.saver.delete_thread(thread.thread_id)
            kept_namespace = memory_namespace(kept_reducer, retained.config)
            for item in [*memories, *backend.store.search(kept_namespace, limit=10_000)]:
                backend.store.delete(item.namespace, item.key)
            print("The demo's threads and memories were deleted from PostgreSQL (--keep keeps "
                  "them).")
    if backend.files and not keep:
        # Closed now: the checkpoints of the unreduced thread alone are over 100 MB at 200
        # turns, which nobody wants left behind in demo-output/.
        size = sum(f.stat().st_size for f in backend.files if f.exists())
        for path in backend.files:
            path.unlink(missing_ok=True)
        print(f"The SQLite files ({_size(size)}) were deleted (--keep keeps them).")
    return 1 if problems else 0


def print_side_by_side(plain: Thread, reduced: Thread, retained: Thread) -> None:
    counter = resolve_token_counter("approximate")
    threads = (plain, reduced, retained)

    def tokens(thread: Thread) -> str:
        return str(sum(counter(m) for m in thread.model.last_window))

    rows = [
        ("", *(t.label for t in threads)),
        ("messages in the thread", *(str(t.messages[-1]) for t in threads)),
        ("bytes stored for the thread", *(_size(t.bytes[-1]) for t in threads)),
        ("largest window the model saw", *(f"{max(t.model.windows)} messages" for t in threads)),
        ("tokens in the last window (approx.)", *(tokens(t) for t in threads)),
    ]
    for label, *values in rows:
        print(f"  {label:<36}" + "".join(f"{v:>17}" for v in values))
    ratio = plain.bytes[-1] / max(reduced.bytes[-1], 1)
    kept_ratio = plain.bytes[-1] / max(retained.bytes[-1], 1)
    print(f"\n  The reducer stored {ratio:.1f}x fewer bytes for the same conversation; with "
          f"keep_checkpoints={KEEP_CHECKPOINTS}, {kept_ratio:.0f}x fewer.")


def _cli() -> str:
    """How to call the command line from here: the environment's script, relative if short."""
    script = Path(sys.executable).parent / "agentstate-reducer"
    if not script.exists():
        return "agentstate-reducer"
    relative = os.path.relpath(script)
    return relative if not relative.startswith("..") else str(script)


def check_memory(
    everything: list[BaseMessage], kept: list[BaseMessage], delivered: Counter[str],
    memories: list[Any],
) -> list[str]:
    """What is wrong with long-term memory, if anything."""
    problems = []
    twice = [i for i, n in delivered.items() if n != 1]
    if twice:
        problems.append(f"{len(twice)} messages were delivered more than once, e.g. {twice[0]}")
    kept_ids = {str(m.id) for m in kept}
    if kept_ids & set(delivered):
        problems.append(f"{len(kept_ids & set(delivered))} kept messages were also pruned")
    keys = Counter(item.key for item in memories)
    if set(keys) != set(delivered):
        problems.append(
            f"memory holds {len(keys)} keys but {len(delivered)} messages were pruned "
            f"({len(set(delivered) - set(keys))} missing, {len(set(keys) - set(delivered))} extra)"
        )
    said = Counter(str(m.content) for m in everything)
    held = Counter(str(item.value["content"]) for item in memories)
    held.update(str(m.content) for m in kept)
    if said != held:
        problems.append("window + memory do not hold exactly the messages of the conversation")
    return problems


def print_window(window: list[BaseMessage], head: int = 4, tail: int = 8) -> None:
    print(f"\nThe last window the model saw ({len(window)} messages):")
    rows = list(enumerate(window))
    if len(rows) > head + tail + 1:
        shown: list[tuple[int, BaseMessage] | None] = [*rows[:head], None, *rows[-tail:]]
    else:
        shown = list(rows)
    for row in shown:
        if row is None:
            print(f"  {'':>3}  ... {len(rows) - head - tail} more ...")
            continue
        i, message = row
        text = str(message.content)
        if isinstance(message, AIMessage) and message.tool_calls:
            text = " ".join(f"{c['name']}({json.dumps(c['args'])})" for c in message.tool_calls)
        text = " ".join(text.split())
        text = text if len(text) <= 78 else text[:77] + "…"
        print(f"  {i:>3}  {message.type:<6}  {text}")


def draw_chart(
    plain: Thread, reduced: Thread, retained: Thread, path: Path, backend: str
) -> None:
    import matplotlib.pyplot as plt

    fig = chart_figure(plain, reduced, retained, backend)
    fig.savefig(path)
    plt.close(fig)


def chart_figure(plain: Thread, reduced: Thread, retained: Thread, backend: str) -> Any:
    """The storage chart: bytes (log scale) and messages per turn, each line labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = range(1, len(plain.bytes) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), dpi=110)
    lines = [
        (plain, "#c0392b", "-", "without reducer"),
        (reduced, "#1f6fb2", "-", "with ReducingSaver"),
        (retained, "#27ae60", "--", f"ReducingSaver(keep_checkpoints={KEEP_CHECKPOINTS})"),
    ]
    panels: list[tuple[Any, str, Callable[[Thread], list[float]], Callable[[Thread], str], str]] = [
        (left, "MB stored", lambda t: [b / 1e6 for b in t.bytes], lambda t: _size(t.bytes[-1]),
         f"Bytes stored for one thread: all its checkpoints ({backend})"),
        (right, "messages", lambda t: [float(n) for n in t.messages],
         lambda t: str(t.messages[-1]), "Messages in the thread's latest checkpoint"),
    ]
    for ax, unit, values_of, last_of, title in panels:
        top, bottom = 1e-9, float("inf")
        ends: dict[str, tuple[float, str]] = {}  # one label per end value, not one per line
        for thread, color, style, label in lines:
            values = values_of(thread)
            top, bottom = max(top, max(values)), min(bottom, min(v for v in values if v > 0))
            # The retention line lies on the reducer's in the messages panel (the same
            # window): dashed and drawn last, so both stay visible.
            ax.plot(turns, values, color=color, lw=3.2 if style == "-" else 2, ls=style,
                    label=label, zorder=3 if style == "--" else 2)
            ends.setdefault(last_of(thread), (values[-1], color))
        if unit == "MB stored":
            # Megabytes against kilobytes: only a log scale shows all three.
            ax.set_yscale("log")
            ax.set_ylim(bottom / 2, top * 3)
        else:
            ax.set_ylim(0, top * 1.15)
        for text, (value, color) in ends.items():
            ax.annotate(text, (turns[-1], value), textcoords="offset points", xytext=(6, 0),
                        ha="left", va="center", color=color, fontweight="bold")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("turn")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        ax.set_xlim(1, max(turns[-1], 2))
        ax.margins(x=0)
        ax.legend(loc="upper left", frameon=False, fontsize=9)
    fig.suptitle(f"{len(turns)} turns of a tool-calling agent: storage per turn")
    fig.tight_layout(w_pad=6)  # room right of each panel for the end labels
    return fig


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200, help="conversation turns (default 200)")
    parser.add_argument("--out-dir", type=Path, default=Path("demo-output"),
                        help="where the SQLite files, chart and transcript go "
                             "(default: demo-output)")
    parser.add_argument("--keep", action="store_true",
                        help="with DATABASE_URL, keep the demo's threads and memories "
                             "(deleted by default)")
    args = parser.parse_args(argv)
    if args.turns < 1:
        parser.error(f"--turns must be >= 1, got {args.turns!r}")
    url = os.environ.get("DATABASE_URL") or None
    if url is not None and not url.startswith(("postgres://", "postgresql://")):
        parser.error(f"DATABASE_URL must be a postgresql:// URL, got {url!r}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    return run(args.turns, args.out_dir, url, args.keep)


if __name__ == "__main__":
    sys.exit(main())
