"""``uvicorn lean_dojo_v2.external_api.python.server:app --port 23337``: LeanDojo-v2's model
server, as leanloop's (``leanloop.serve``): Lean Copilot's ``POST /generate`` (with
``use_reward``: the steps remaining from the progress model at ``$LEANPROGRESS_MODEL``) and
``POST /encode``, and leanloop's routes besides.

With ``$LEANLOOP_SERVE_CONFIG`` set, the server serves that configuration (read when it starts).
Without it, it serves what LeanDojo-v2's server did: one model named ``deepseek``,
DeepSeek-Prover-V2-671B (provider novita) at Hugging Face's router with ``HF_TOKEN``.
"""

from __future__ import annotations

from leanloop.serve import LeanloopServer, ModelConfig, ServeConfig, create_app
from leanloop.settings import Settings


def leandojo_v2_config() -> ServeConfig:
    """The configuration of LeanDojo-v2's server: ``deepseek`` at Hugging Face's router.

    Returns:
        The server configuration.
    """
    from lean_dojo_v2.prover.external_prover import DEFAULT_MODEL
    from leanloop.prover.external import HF_ROUTER_URL, HF_TOKEN_ENV

    deepseek = ModelConfig(
        name="deepseek",
        provider="openai",
        model=DEFAULT_MODEL,
        base_url=HF_ROUTER_URL,
        api_key_env=HF_TOKEN_ENV,
    )
    return ServeConfig(models=[deepseek])


def build_app() -> LeanloopServer:
    """The application: ``$LEANLOOP_SERVE_CONFIG``'s when it is set, else LeanDojo-v2's.

    Returns:
        leanloop's server (an ASGI application).
    """
    if Settings.from_env().serve_config is not None:
        return create_app()
    return create_app(leandojo_v2_config())


app = build_app()

__all__ = ["app", "build_app", "leandojo_v2_config"]
