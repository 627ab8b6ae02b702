"""The reader: every message shape read into one record.

Shapes understood: LangChain message objects (and their ``*Chunk`` classes,
``ChatMessage(role=...)``), duck-typed objects with ``type`` or ``role``,
OpenAI chat dicts, LangChain dicts (``{"role"|"type": ...}``, ``messages_to_dict``
output ``{"type", "data"}`` and ``dumpd`` output ``{"lc", "type": "constructor"}``)
Anthropic dicts with content blocks (``tool_use`` / ``tool_result``), Gemini contents
(``parts``, read in ``gemini``), Bedrock Converse messages (untyped blocks, read
in ``bedrock``), PydanticAI ``ModelRequest`` / ``ModelResponse`` messages (read
in ``pydantic_ai``), Microsoft Agent Framework ``Message`` objects (read in
``agent_framework``), and OpenAI Responses API / Agents SDK items (read in
``responses``).

This package is the only place that knows role aliases, where tool-call ids live and
how text is stored. Every other module reads a message through its
:class:`MessageRecord` (:func:`read_message`); other shape families plug in as a
:class:`Shape` (:func:`~agentstate_reducer.read.record.register`).

By job: ``fields`` (where fields live, roles), ``record`` (the record, the Shape registry),
``chat`` (the reader and its one fast path), ``pydantic_ai``, ``responses``, ``gemini``,
``bedrock``, ``agent_framework`` (the other shape families),
``parts`` (what a record says of its parts),
``markers`` (injected messages), ``notes`` (the turn note's wording, the note read by it),
``write`` (new messages, edited copies, synthetic results), ``requests`` (provider
requests).
"""

from __future__ import annotations

# The shape families register in this order, the order the general reader tries them in.
# isort: off
from . import pydantic_ai as pydantic_ai
from . import responses as responses
from . import gemini as gemini
from . import bedrock as bedrock
from . import agent_framework as agent_framework
# isort: on
from .chat import read_message, read_messages, too_deep, too_deep_among
from .fields import (
    AI,
    FUNCTION,
    HUMAN,
    MAX_DEPTH,
    PRUNABLE_ROLES,
    SYSTEM,
    TOOL,
    args_text,
    message_content,
    message_id,
    normalize_role,
    raw_message_id,
)
from .markers import (
    INJECTED_KEY,
    PACKAGE_NOTE,
    SUMMARY_ACK_KIND,
    SUMMARY_KIND,
    TURN_NOTE_KIND,
    injected_kind,
    injected_mark,
    is_injected,
    is_summary,
    package_note,
    summary_covers,
)
from .notes import (
    MERGED_NOTE_KEY,
    TURN_NOTE_PREFIX,
    is_turn_note_text,
    turn_note_header,
    turn_note_in,
    without_turn_note,
)
from .parts import (
    call_signatures,
    content_kinds,
    editable_body,
    editable_parts,
    editable_size,
    holding_block,
    message_parts,
    native_provider,
    reasoning_model,
    reasoning_parts,
    reported_input_tokens,
)
from .record import (
    BLANK_PART,
    CHAT,
    GROUP_BOUNDARY,
    GROUP_NONE,
    GROUP_OUTPUT,
    GROUP_REASONING,
    MEDIA_PART,
    NO_EXTRAS,
    OTHER_PART,
    REASONING_PART,
    TEXT_PART,
    TOOL_ARGS_PART,
    TOOL_RESULT_PART,
    TOOL_USE_PART,
    EditablePart,
    Extras,
    MessageParts,
    MessageRecord,
    ReasoningPart,
    Shape,
    make_record,
    record_group,
    register,
)
from .requests import (
    Request,
    has_anthropic_blocks,
    is_serialisation_stub,
    looks_like_message,
    read_request,
    reply_text,
    request_instructions,
    serialisation,
    write_request,
)
from .responses import item_type
from .write import (
    INTERRUPTED_RESULT,
    as_update,
    copy_state,
    is_merge_update,
    is_removal,
    match_shape,
    message_state,
    part_text,
    synthetic_results,
    text_block,
    with_content,
    with_parts,
    with_results,
    with_text_appended,
    without_reasoning,
    write_message,
)

__all__ = (
    "is_merge_update",
    "register",
    "reported_input_tokens",
    "AI",
    "BLANK_PART",
    "FUNCTION",
    "GROUP_BOUNDARY",
    "GROUP_NONE",
    "GROUP_OUTPUT",
    "GROUP_REASONING",
    "HUMAN",
    "INJECTED_KEY",
    "INTERRUPTED_RESULT",
    "MAX_DEPTH",
    "MEDIA_PART",
    "MERGED_NOTE_KEY",
    "OTHER_PART",
    "PACKAGE_NOTE",
    "PRUNABLE_ROLES",
    "REASONING_PART",
    "SUMMARY_ACK_KIND",
    "SUMMARY_KIND",
    "SYSTEM",
    "TEXT_PART",
    "TOOL",
    "TOOL_ARGS_PART",
    "TOOL_RESULT_PART",
    "TOOL_USE_PART",
    "TURN_NOTE_KIND",
    "TURN_NOTE_PREFIX",
    "CHAT",
    "NO_EXTRAS",
    "EditablePart",
    "Extras",
    "MessageParts",
    "MessageRecord",
    "ReasoningPart",
    "Shape",
    "content_kinds",
    "args_text",
    "call_signatures",
    "copy_state",
    "injected_kind",
    "injected_mark",
    "is_injected",
    "is_summary",
    "is_turn_note_text",
    "make_record",
    "editable_body",
    "editable_size",
    "item_type",
    "record_group",
    "editable_parts",
    "holding_block",
    "message_content",
    "message_id",
    "message_parts",
    "message_state",
    "native_provider",
    "normalize_role",
    "package_note",
    "part_text",
    "raw_message_id",
    "read_message",
    "read_messages",
    "read_request",
    "Request",
    "write_request",
    "write_message",
    "reply_text",
    "is_serialisation_stub",
    "request_instructions",
    "reasoning_model",
    "reasoning_parts",
    "summary_covers",
    "synthetic_results",
    "with_results",
    "as_update",
    "has_anthropic_blocks",
    "is_removal",
    "looks_like_message",
    "match_shape",
    "serialisation",
    "text_block",
    "too_deep",
    "too_deep_among",
    "turn_note_header",
    "turn_note_in",
    "with_content",
    "with_parts",
    "with_text_appended",
    "without_reasoning",
    "without_turn_note",
)
