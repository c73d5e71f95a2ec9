"""The model backends, one per provider: local causal LMs and encoders, and generators behind the
official clients of OpenAI-compatible endpoints, Anthropic and Google Gemini."""

from __future__ import annotations

from leanloop.serve.admission import Gate
from leanloop.serve.config import ModelConfig
from leanloop.serve.keys import Secrets
from leanloop.serve.providers.base import Backend, EncoderBackend, GeneratorBackend


def build_backend(config: ModelConfig, gate: Gate, secrets: Secrets) -> Backend:
    """The backend of a configured model, not loaded yet (building it is cheap: no model, no
    client, no key is touched)."""
    if config.provider == "hf":
        from leanloop.serve.providers.local import LocalGenerator

        return LocalGenerator(config, gate)
    if config.provider == "encoder":
        from leanloop.serve.providers.local import LocalEncoder

        return LocalEncoder(config, gate)
    if config.provider == "openai":
        from leanloop.serve.providers.openai_api import OpenAIGenerator

        return OpenAIGenerator(config, gate, secrets)
    if config.provider == "anthropic":
        from leanloop.serve.providers.anthropic_api import AnthropicGenerator

        return AnthropicGenerator(config, gate, secrets)
    from leanloop.serve.providers.gemini_api import GeminiGenerator

    return GeminiGenerator(config, gate, secrets)


__all__ = ["Backend", "EncoderBackend", "GeneratorBackend", "build_backend"]
