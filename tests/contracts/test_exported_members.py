"""Keep ``__all__`` honest: every public name is exported, sorted, and importable."""

from __future__ import annotations

import agentstate_reducer


def test_all_is_sorted_and_resolves() -> None:
    names = agentstate_reducer.__all__
    assert list(names) == sorted(names)
    for name in names:
        assert getattr(agentstate_reducer, name) is not None


def test_documented_names_are_exported() -> None:
    documented = {
        "MessageReducer",
        "ReducerConfig",
        "ReducerResult",
        "RememberFn",
        "Background",
        "DEFAULT_NAMESPACE_KEY",
        "resolve_token_counter",
        "default_summary_messages_factory",
    }
    assert documented <= set(agentstate_reducer.__all__)
    assert agentstate_reducer.DEFAULT_NAMESPACE_KEY == "memory_namespace"


def test_no_unexported_public_names() -> None:
    public = {
        name
        for name in vars(agentstate_reducer)
        if not name.startswith("_") and name not in {"annotations"}
    }
    modules = {
        name for name in public if type(getattr(agentstate_reducer, name)).__name__ == "module"
    }
    assert public - modules == set(agentstate_reducer.__all__)
