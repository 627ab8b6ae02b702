"""The arguments of :func:`~agentstate_reducer.trim.trim_messages` checked (every one, as
:class:`~agentstate_reducer.config.ReducerConfig` checks its fields, LangChain's words
first where it raises), whether a callable counts one message or a list, and the parsed
``start_on`` / ``end_on``."""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Union

from .errors import ConfigError, ConfigTypeError
from .read import AI, FUNCTION, HUMAN, SYSTEM, TOOL, MessageRecord, normalize_role
from .tokens import check_token_counter

#: What ``start_on`` / ``end_on`` accept: a role name or alias (``"human"``, ``"user"``,
#: ``"ai"``, ``"tool"``, ...), a message class, or a sequence of those.
MessageTypeSpec = str | type | Sequence[str | type]

_LIST_TYPES = (list, tuple, Sequence, Iterable, Collection)
#: Roles ``start_on`` / ``end_on`` may name (after aliasing).
_ROLES = frozenset({HUMAN, AI, SYSTEM, TOOL, FUNCTION})



def _first_param_annotation(fn: Callable[..., Any]) -> Any:
    """The annotation of ``fn``'s first parameter, evaluated when possible, else ``None``."""
    try:
        try:
            signature = inspect.signature(fn, eval_str=True)
        except Exception:  # an unresolvable forward reference: keep the annotation's text
            signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins such as ``len`` may have no signature
        return None
    params = list(signature.parameters.values())
    if not params or params[0].annotation is inspect.Parameter.empty:
        return None
    return params[0].annotation


def _is_list_annotation(annotation: Any) -> bool:
    if isinstance(annotation, str):
        head = annotation.replace(" ", "").split("[", 1)[0].rsplit(".", 1)[-1]
        return head.lower() in {"list", "tuple", "sequence", "iterable", "collection"}
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return bool(members) and all(_is_list_annotation(a) for a in members)
    kind = origin or annotation
    return isinstance(kind, type) and kind in _LIST_TYPES


def _counts_one_message(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` counts one message: its first parameter is annotated with a non-list type.

    Unannotated callables (``len``, lambdas), ``Any`` and ``object`` count a list, as in
    LangChain; unlike LangChain, any single-message annotation works (``BaseMessage``,
    ``AIMessage``, ``dict``, ``Mapping[str, Any]``, also under postponed annotations).
    """
    annotation = _first_param_annotation(fn)
    if annotation is None or annotation is Any or annotation is object:
        return False
    if annotation in ("Any", "typing.Any", "object"):
        return False
    return not _is_list_annotation(annotation)




class _TypeMatch:
    """A parsed ``start_on`` / ``end_on``: role names, and classes matched by ``isinstance``."""

    def __init__(self, name: str, spec: MessageTypeSpec) -> None:
        items: Iterable[Any] = (spec,) if isinstance(spec, (str, type)) else spec
        if not isinstance(items, Iterable):
            raise ConfigTypeError(
                f"{name} must be a role name, a message class or a sequence of them, got {spec!r}"
            )
        roles: set[str] = set()
        classes: list[type] = []
        for item in items:
            if isinstance(item, str):
                roles.add(normalize_role(item))
            elif isinstance(item, type):
                classes.append(item)
            else:
                raise ConfigTypeError(
                    f"{name} must be a role name, a message class or a sequence of them, "
                    f"got {item!r} in {spec!r}"
                )
        self._roles = frozenset(roles)
        self._classes = tuple(classes)
        # A dict has no class to test: match it by the role the class name stands for.
        self._class_roles = frozenset(normalize_role(c.__name__) for c in classes)

    def __call__(self, message: object, view: MessageRecord) -> bool:
        if view.role in self._roles:
            return True
        if isinstance(message, Mapping):
            return view.role in self._class_roles
        return isinstance(message, self._classes)




def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigTypeError(f"{name} must be True or False, got {value!r:.80}")


def _check_types(name: str, spec: object) -> None:
    """``start_on`` / ``end_on``: role names the reader knows, message classes, or a list."""
    if spec is None:
        return
    items = (spec,) if isinstance(spec, (str, type)) else spec
    if not isinstance(items, Iterable) or isinstance(items, (bytes, Mapping)):
        raise ConfigTypeError(
            f"{name} must be a role name, a message class or a sequence of them, got {spec!r:.80}"
        )
    for item in items:
        if isinstance(item, str):
            if normalize_role(item) not in _ROLES:
                raise ConfigError(
                    f"{name}: {item!r} is not a role; expected one of 'human' ('user'), 'ai' "
                    "('assistant'), 'system' ('developer'), 'tool', 'function', or a message "
                    "class"
                )
        elif not isinstance(item, type):
            raise ConfigTypeError(
                f"{name} must be a role name, a message class or a sequence of them, "
                f"got {item!r:.80} in {spec!r:.80}"
            )


def _validate(
    strategy: object,
    start_on: object,
    include_system: object,
    max_tokens: object,
    *,
    token_counter: object = None,
    end_on: object = None,
    allow_partial: object = False,
    keep_tool_pairs: object = True,
    text_splitter: object = None,
) -> None:
    """Check every argument of :func:`trim_messages` as :class:`ReducerConfig` checks its fields.

    A wrong type raises :class:`ConfigTypeError` (a ``TypeError`` too), a wrong value
    :class:`ConfigError` (a ``ValueError``); both name the argument.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, float)):
        raise ConfigTypeError(f"max_tokens must be a number, got {max_tokens!r:.80}")
    if math.isnan(max_tokens):  # a negative budget keeps nothing, as in LangChain
        raise ConfigError(f"max_tokens must be a number of tokens, got {max_tokens!r}")
    # Where LangChain raises, its words come first (code matching them keeps working).
    if not isinstance(strategy, str):
        raise ConfigTypeError(f"strategy must be 'first' or 'last', got {strategy!r:.80}")
    if strategy not in ("first", "last"):
        raise ConfigError(
            f"Unrecognized strategy={strategy!r:.80}. Supported strategies are 'last' and 'first'."
        )
    for name, flag in (
        ("include_system", include_system),
        ("allow_partial", allow_partial),
        ("keep_tool_pairs", keep_tool_pairs),
    ):
        _check_flag(name, flag)
    _check_types("start_on", start_on)
    _check_types("end_on", end_on)
    for name, value in (("start_on", start_on), ("include_system", include_system)):
        if strategy == "first" and value:
            raise ConfigError(
                f"{name} parameter is only valid with strategy='last' (got {name}={value!r:.80} "
                f"with strategy='first'); drop {name} or use strategy='last'"
            )
    try:
        check_token_counter(token_counter)
    except ConfigError as exc:
        if isinstance(token_counter, str):  # an unknown name: a wrong value
            raise ConfigError(
                f"Invalid token_counter shortcut '{token_counter}'. Available shortcuts: "
                f"'approximate', 'tiktoken', an encoding name or a model name ({exc})"
            ) from None
        raise ConfigTypeError(
            "'token_counter' expected to be a model that implements "
            "'get_num_tokens_from_messages()' or a function. Received object of type "
            f"{type(token_counter)}. (Names work too: 'approximate', 'tiktoken', an "
            "encoding name or a model name.)"
        ) from None
    if text_splitter is not None and not (
        callable(text_splitter) or callable(getattr(text_splitter, "split_text", None))
    ):
        raise ConfigTypeError(
            f"text_splitter must be a callable str -> list[str] or an object with "
            f"split_text(), got {text_splitter!r:.80}"
        )
