"""Fixtures of the adapted peers' tests in this folder."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import langgraph_peer
import pydantic_ai_peer
import pytest


@pytest.fixture(params=pydantic_ai_peer.FLAVOURS)
def reducing_flavour(request: pytest.FixtureRequest) -> str:
    """Each PydanticAI test once per way the package offers the reduction."""
    pydantic_ai_peer.flavour[0] = request.param
    return request.param


@pytest.fixture
def create_module(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[str], ModuleType]:
    return pydantic_ai_peer.module_factory(tmp_path, re.sub(r"\W", "_", request.node.name))


@pytest.fixture(params=langgraph_peer.FLAVOURS)
def langgraph_flavour(request: pytest.FixtureRequest) -> str:
    """Each LangGraph test once per way the package replaces ``add_messages``."""
    langgraph_peer.current[0] = langgraph_peer.build(request.param)
    langgraph_peer.expect_difference(request, request.param)
    return request.param
