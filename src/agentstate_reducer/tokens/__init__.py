"""Token counters: the user's, exact counts offline, estimators by model name, calibration.

:func:`resolve_token_counter` turns every accepted ``token_counter`` value into a
per-message counter::

    a callable              used as is: ``counter(message) -> int``
    a chat model            ``model.get_num_tokens_from_messages([message])``
    "o200k_base"            exact counts (or ImportError naming the extra);
    "cl100k_base"           "tiktoken" is o200k_base
    a model name            through :data:`MODELS`: exact for OpenAI models, an
                            estimator of :data:`ESTIMATORS` for Claude, Gemini and
                            open models; an unknown name is a ConfigError listing
                            the families
    "approximate"           the character heuristic
    None                    exact o200k_base when the extra is installed, else the
                            heuristic (with one log line per process)

The built-in counters bill a message the way a chat API frames it (see
:func:`count_message`); they differ only in how they count a piece of text.
Exact counts read the genuine rank files that the ``tokens`` extra installs, check
their SHA-256, and build the encoding here: nothing is ever downloaded, so counting
never opens a network connection.

:class:`TokenCountCache` remembers per-message counts across calls so that an
append loop only counts the messages it has not seen.

The package, by job: ``count`` (the framing rules), ``heuristic`` (the character
estimate), ``encodings`` (exact counts), ``models`` (the registry and resolution),
``calibration`` (usage and request overhead), ``cache`` (counts remembered across calls).
"""

from __future__ import annotations

from .cache import TokenCountCache
from .calibration import REPLY_PRIMING_TOKENS, Calibration, request_overhead
from .count import (
    MEDIA_TOKENS,
    TokenCounter,
    approximate_token_count,
    count_back,
    count_message,
    read_counted,
)
from .encodings import (
    CL100K_BASE_SHA256,
    DEFAULT_ENCODING,
    O200K_BASE_SHA256,
    exact_token_counter,
    load_cl100k_base,
    load_encoding,
    load_o200k_base,
)
from .heuristic import approximate_text_tokens
from .models import (
    ESTIMATORS,
    MODELS,
    Estimator,
    ModelFamily,
    check_token_counter,
    context_window,
    model_family,
    model_name,
    resolve_budget,
    resolve_token_counter,
)

__all__ = (
    "CL100K_BASE_SHA256",
    "DEFAULT_ENCODING",
    "REPLY_PRIMING_TOKENS",
    "Calibration",
    "ESTIMATORS",
    "MEDIA_TOKENS",
    "MODELS",
    "O200K_BASE_SHA256",
    "Estimator",
    "ModelFamily",
    "TokenCountCache",
    "TokenCounter",
    "approximate_text_tokens",
    "approximate_token_count",
    "check_token_counter",
    "context_window",
    "count_back",
    "count_message",
    "exact_token_counter",
    "load_cl100k_base",
    "load_encoding",
    "load_o200k_base",
    "model_family",
    "model_name",
    "read_counted",
    "request_overhead",
    "resolve_token_counter",
    "resolve_budget",
)
