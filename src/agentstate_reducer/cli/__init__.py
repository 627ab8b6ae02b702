"""The command line: ``agentstate-reducer reduce|trim|count FILE`` (standard library only).

Reads a transcript in the shapes people keep (a JSON list of messages, an object
with ``"messages"``, JSONL, an OpenAI chat-completions, OpenAI Responses or Anthropic
Messages request, a Gemini ``generateContent`` or Bedrock Converse request,
LangChain-serialised messages), runs the reducer over it and writes the survivors back
in the shape it read.

Exit status: 0 done, 1 the input could not be read or the output not written,
2 bad options, 3 the output breaks its provider's rules (written all the same).

By job: ``entry`` (the parser and :func:`main`), ``transcript`` (reading a file into a
:class:`Transcript` and writing it back), ``commands`` (``reduce``, ``trim``, ``count``),
``explain`` (the tables of ``--explain``).
"""

from __future__ import annotations

from .entry import main
from .transcript import Transcript, dump, load

__all__ = ("Transcript", "dump", "load", "main")
