"""Fixtures of the integration tests (a PostgreSQL URL, a fresh schema, the agent tests'
:class:`~integration_kit.Kit`). The shared pieces they hand out live in ``integration_kit``,
which tests import by that name: a module named ``conftest`` would be another folder's too."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from integration_kit import DEFAULT_POSTGRES_URL, POSTGRES_URL_ENV, Kit


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A reachable PostgreSQL URL, or a skip saying how to provide one."""
    psycopg = pytest.importorskip("psycopg")
    url = os.environ.get(POSTGRES_URL_ENV, DEFAULT_POSTGRES_URL)
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.skip(
            f"PostgreSQL is not reachable at {url} ({str(exc).splitlines()[0]}); start a server "
            f"with trust auth and a database 'test', or set {POSTGRES_URL_ENV} to "
            "postgresql://USER@HOST:PORT/DB"
        )
    yield url


@pytest.fixture
def postgres(postgres_url: str) -> Iterator[dict[str, Any]]:
    """psycopg ``connect`` arguments for a fresh schema, dropped afterwards, so reruns
    and parallel runs never collide (what LangGraph's Postgres classes need, too)."""
    import psycopg
    from psycopg.rows import dict_row

    schema = f"agentstate_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield {
            "conninfo": postgres_url,
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": f"-c search_path={schema}",
        }
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def kit() -> Kit:
    return Kit()
