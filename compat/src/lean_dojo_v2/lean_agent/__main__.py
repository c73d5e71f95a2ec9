"""``python -m lean_dojo_v2.lean_agent --config lean_agent.yaml``: leanloop's
``python -m leanloop.agent.lean_agent``."""

from __future__ import annotations

import sys

from lean_dojo_v2.agent.lean_agent import main

if __name__ == "__main__":
    sys.exit(main())
