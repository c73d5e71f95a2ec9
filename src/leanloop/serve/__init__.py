"""The model server: Lean Copilot's ``/generate`` and ``/encode``, LeanProgress rewards, Lean
verification in Kimina's shape, the OpenAI API (chat and text completions, streamed token by
token), and a playground page, over local models and the official clients of OpenAI-compatible
endpoints, Anthropic and Gemini.

``uvicorn leanloop.serve:app`` serves the configuration named by ``$LEANLOOP_SERVE_CONFIG``
(read when the server starts); ``leanloop serve --config FILE`` does the same from the command
line. Importing this package loads nothing: names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from leanloop.lazy import lazy_exports

_EXPORTS = {
    "app": "leanloop.serve.application",
    "create_app": "leanloop.serve.application",
    "LeanloopServer": "leanloop.serve.application",
    "ServeConfig": "leanloop.serve.config",
    "ModelConfig": "leanloop.serve.config",
    "LeanConfig": "leanloop.serve.config",
}

__all__ = list(_EXPORTS)

if TYPE_CHECKING:  # what type checkers see; at run time a name loads on first use
    from leanloop.serve.application import LeanloopServer as LeanloopServer
    from leanloop.serve.application import app as app
    from leanloop.serve.application import create_app as create_app
    from leanloop.serve.config import LeanConfig as LeanConfig
    from leanloop.serve.config import ModelConfig as ModelConfig
    from leanloop.serve.config import ServeConfig as ServeConfig
else:
    __getattr__ = lazy_exports(__name__, _EXPORTS)
