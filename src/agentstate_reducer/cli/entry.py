"""The argument parser and :func:`main`, the entry point of ``agentstate-reducer``."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, MessageFormatError, ReducerError
from ..read import (
    AI,
    FUNCTION,
    HUMAN,
    SYSTEM,
    TOOL,
    normalize_role,
)
from ..tokens import check_token_counter
from ..validate import PROVIDERS
from .commands import (
    _MAX_MESSAGES,
    _SPLITTERS,
    _cmd_count,
    _cmd_reduce,
    _cmd_trim,
    _UsageError,
)
from .explain import (
    _EXPLAIN_ROWS,
    _HEAD,
    _TAIL,
)
from .progress import Status
from .transcript import (
    _InputError,
)


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _human_role(text: str) -> str:
    role = _role(text)
    if role not in (HUMAN, "none"):
        raise argparse.ArgumentTypeError(
            f"reduce can only start the kept tail on a human turn (human, or an alias such as "
            f"user) or none, got {text!r}"
        )
    return role


def _role(text: str) -> str:
    if text == "none":
        return text
    role = normalize_role(text)
    if role not in (HUMAN, AI, SYSTEM, TOOL, FUNCTION):
        raise argparse.ArgumentTypeError(
            f"expected a role (human, ai, system, tool, function, or an alias such as user or "
            f"assistant), got {text!r}"
        )
    return role


def _parser(prog: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog or "agentstate-reducer",
        description=(
            "Bound an agent's message history without breaking tool-call pairs. Reads a JSON "
            'list of messages, {"messages": [...]}, JSONL, an OpenAI, Anthropic, Gemini or Bedrock '
            "Converse request, or LangChain-serialised messages, and writes the result in the "
            "same shape."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    reduce = _command(
        commands,
        "reduce",
        _cmd_reduce,
        help="prune a transcript as MessageReducer would",
        description=(
            "Prune a transcript as MessageReducer would and write the surviving messages "
            "(stdout, or --out FILE) in the shape they were read in."
        ),
    )
    count = reduce.add_argument_group("count mode (the default)")
    count.add_argument("--max-messages", type=_non_negative, metavar="N",
                       help=f"prune when there are more than N messages (default: "
                            f"{_MAX_MESSAGES})")
    count.add_argument("--min-messages", type=_non_negative, metavar="N",
                       help="messages to keep after a prune (default: half of --max-messages, "
                            f"rounded down: {_MAX_MESSAGES // 2} for the default "
                            f"{_MAX_MESSAGES}, as in ReducerConfig)")
    tokens = reduce.add_argument_group("token mode (when --max-tokens is given)")
    tokens.add_argument("--max-tokens", type=_non_negative, metavar="N",
                        help="prune when the total exceeds N tokens")
    tokens.add_argument("--target-tokens", type=_non_negative, metavar="N",
                        help="prune down to N tokens (default: --max-tokens)")
    _add_counter(tokens)
    rules = reduce.add_argument_group("rules")
    rules.add_argument("--no-preserve-first", dest="preserve_first", action="store_false",
                       help="allow the first message (usually the system prompt) to be pruned")
    rules.add_argument("--no-cascade", dest="cascade", action="store_false",
                       help="do not prune the tool results of a pruned tool call")
    rules.add_argument("--repair-dangling-calls", action="store_true",
                       help="give each dead tool call (no result, and the conversation moved "
                            "on) a synthetic result; pending calls are never touched")
    rules.add_argument("--start-on", type=_human_role, metavar="ROLE",
                       help="human (or an alias such as user): the kept tail starts on a human "
                            "message (the default for an Anthropic, Gemini or Bedrock request); "
                            "none: wherever the window ends")
    rules.add_argument("--turn-ladder", action="store_true",
                       help="token mode: a current turn over --max-tokens clears its older "
                            "steps' results, then their inputs, then drops its oldest steps "
                            "for one note (as agent_config() does); never the question, never "
                            "the latest step")
    _add_output(reduce, "a table of every message, kept or pruned and why, instead of the "
                        "messages (with --out, the file is written too)")

    trim = _command(
        commands,
        "trim",
        _cmd_trim,
        help="cut a transcript to a token budget as trim_messages would",
        description=(
            "Cut a transcript to a token budget as trim_messages would (LangChain's "
            "trim_messages, without splitting tool calls from their results) and write the "
            "kept messages in the shape they were read in."
        ),
    )
    budget = trim.add_argument_group("budget")
    budget.add_argument("--max-tokens", type=_non_negative, required=True, metavar="N",
                        help="the token budget")
    _add_counter(budget)
    how = trim.add_argument_group("what to keep")
    how.add_argument("--strategy", choices=("last", "first"), default="last",
                     help="keep the end (default) or the start of the conversation")
    system = how.add_mutually_exclusive_group()
    system.add_argument("--include-system", dest="include_system", action="store_true",
                        default=None,
                        help="always keep a leading system message (the default with "
                             "--strategy last: a request keeps its system prompt)")
    system.add_argument("--no-include-system", dest="include_system", action="store_false",
                        help="let the budget cut a leading system message like any other")
    how.add_argument("--start-on", action="append", type=_role, metavar="ROLE",
                     help="with --strategy last, drop leading messages until one of this role "
                          "(human, ai, tool, system; may be repeated; default: human for an "
                          "Anthropic, Gemini or Bedrock request, none: no such rule)")
    how.add_argument("--end-on", action="append", type=_role, metavar="ROLE",
                     help="drop trailing messages until one of this role (may be repeated)")
    how.add_argument("--allow-partial", action="store_true",
                     help="keep part of the message at the edge (whole content blocks, else "
                          "pieces of its text)")
    how.add_argument("--split-on", choices=sorted(_SPLITTERS), default="line",
                     help="with --allow-partial, the pieces text is cut into (default: line)")
    how.add_argument("--no-keep-tool-pairs", dest="keep_tool_pairs", action="store_false",
                     help="allow the cut to separate tool calls from their results, as "
                          "LangChain's trim_messages does")
    _add_output(trim, "a table of every message, kept, partial or trimmed, instead of the "
                      "messages (with --out, the file is written too)")

    _command(
        commands,
        "count",
        _cmd_count,
        help="print per-message and total tokens with each counter",
        description="Print per-message and total tokens with each available counter.",
    )
    return parser


def _counter_name(value: str) -> str:
    """An argparse type: a name ``token_counter`` accepts (checked, not loaded)."""
    try:
        check_token_counter(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _command(
    commands: Any,
    name: str,
    run: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    """The subcommand ``name``, reading one transcript (``FILE``) and run by ``run``."""
    command: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=description
    )
    command.add_argument("file", metavar="FILE", help="the transcript; '-' reads standard input")
    command.set_defaults(run=run)
    return command


def _add_counter(group: Any) -> None:
    group.add_argument("--counter", type=_counter_name, default="approximate", metavar="NAME",
                       help="token counter: approximate (the default, a character heuristic), "
                            "an encoding (o200k_base, cl100k_base; tiktoken is o200k_base; "
                            "exact, need the [tokens] extra) or a model name (gpt-4o, "
                            "gpt-4.1, gpt-5, o3, gpt-4, claude-sonnet-4-5, gemini-2.5-pro, ...)")


def _add_output(parser: argparse.ArgumentParser, explain_help: str) -> None:
    output = parser.add_argument_group("output")
    output.add_argument("--out", metavar="FILE",
                        help="write here (atomically: a temporary file, then a rename) "
                             "instead of standard output")
    output.add_argument("--explain", action="store_true", help=explain_help)
    output.add_argument("--all", action="store_true",
                        help=f"with --explain, a row for every message (default: above "
                             f"{_EXPLAIN_ROWS} messages, the first {_HEAD}, the last {_TAIL} "
                             "and a count of the others)")
    output.add_argument("--provider",
                        choices=PROVIDERS,
                        help="whose API rules to check the input and output against "
                             "(default: the request's own provider, else openai)")


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run the command line; return the exit status."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")
    parser = _parser(prog)
    args = parser.parse_args(argv)
    name = args.prog = parser.prog
    status = args.status = Status(name)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        try:
            return run(args)
        finally:
            status.clear()  # before an error message, on the same terminal
    except _UsageError as exc:
        parser.exit(2, f"{name}: error: {exc}\n")
    except _InputError as exc:
        parser.exit(1, f"{name}: error: {exc}\n")
    except MessageFormatError as exc:  # met past the first read (a value too deep to count)
        parser.exit(1, f"{name}: error: {exc}\n")
    except (ReducerError, ValueError, RecursionError) as exc:
        # One line, never a traceback, never the transcript's text.
        why = (
            f"a number has more than {sys.get_int_max_str_digits()} digits"
            if isinstance(exc, ValueError) and "integer string conversion" in str(exc)
            else f"cannot process the transcript ({type(exc).__name__})"
        )
        parser.exit(1, f"{name}: error: {why}\n")
    except BrokenPipeError:
        # The reader went away (``| head``): it has what it wanted; stop quietly with
        # status 0, and point stdout at devnull so the flush at exit cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
