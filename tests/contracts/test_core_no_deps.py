"""The core imports and works with every optional dependency blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = (
    "langgraph", "langchain_core", "langchain", "tiktoken", "psycopg", "redis", "pydantic_ai",
    "agents", "openai", "google", "agent_framework",
)


def test_core_runs_without_optional_packages() -> None:
    script = textwrap.dedent(
        f"""
        import sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {BLOCKED!r}:
                    raise ImportError("blocked " + name)
                return None

        sys.meta_path.insert(0, Block())
        from agentstate_reducer import MessageReducer, ReducerConfig
        cfg = ReducerConfig(max_tokens=40, summarize_fn=lambda p: "s", inject_summary=True)
        history = [{{"role": "user", "content": "x" * 40, "id": str(i)}} for i in range(9)]
        result = MessageReducer(config=cfg).reduce(existing=history)
        assert result.pruned and result.summary == "s"
        from agentstate_reducer import summarize_with
        cfg = ReducerConfig(max_tokens=40, summarize_fn=summarize_with(lambda p: "- fact"),
                            inject_summary=True, pin={{"0"}})
        result = MessageReducer(config=cfg).reduce(existing=history)
        assert result.pruned and result.summary == "- fact", result
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r})
        assert not loaded, loaded
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
