"""``python -m agentstate_reducer.cli``: the command line."""

from __future__ import annotations

import sys

from .entry import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
