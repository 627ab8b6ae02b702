"""The merge shared by the LangGraph integration and ``as_langgraph_reducer`` (_merge.py):
the ids it gives the messages it appends."""

from __future__ import annotations

import os
import random
import uuid

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agentstate_reducer._merge import _new_id, plain_append


def test_an_appended_message_without_an_id_gets_a_random_uuid() -> None:
    left = [HumanMessage("hi", id="h0")]
    right = [AIMessage("a"), AIMessage("b")]
    assert plain_append(left, right) is right
    ids = [m.id for m in right]
    assert all(uuid.UUID(i).version == 4 for i in ids) and len(set(ids)) == 2


def test_no_seed_a_program_sets_repeats_the_ids() -> None:
    random.seed(7)
    first = _new_id()
    random.seed(7)
    assert _new_id() != first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_gives_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        os.write(write, _new_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert child and child != _new_id()
