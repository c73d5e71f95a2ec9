"""The trainer configurations' base (the shared configuration idiom of ``leanloop.configfile``)
and what trainers build from it: constructor arguments for ``from_config`` and read-only
attributes with LeanDojo-v2's names."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from leanloop.configfile import CONFIG, ConfigBase, field_names

__all__ = ["CONFIG", "TrainerConfig", "config_field", "field_names", "trainer_arguments"]


@dataclass(config=CONFIG)
class TrainerConfig(ConfigBase):
    """Base of the trainer configurations: a pydantic dataclass per trainer with help text on
    every field, checked when made or changed, loaded from and saved to YAML or JSON (see
    :class:`leanloop.configfile.ConfigBase`)."""


def trainer_arguments(
    config_class: type[TrainerConfig],
    source: str | Path | Mapping[str, Any] | TrainerConfig,
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """A trainer's constructor arguments for ``from_config``: every field of the configuration
    read from ``source`` with the ``kwargs`` naming fields on top, and the other ``kwargs``
    (objects that are not configuration, such as callbacks) as they are."""
    names = field_names(config_class)
    config = config_class.load(source, **{k: v for k, v in kwargs.items() if k in names})
    extra = {k: v for k, v in kwargs.items() if k not in names}
    return {**extra, **{name: getattr(config, name) for name in names}}


def config_field(name: str) -> property:
    """A read-only trainer attribute giving its ``config``'s field ``name`` (trainers keep
    LeanDojo-v2's attribute names this way)."""
    return property(lambda self: getattr(self.config, name), doc=f"``config.{name}``")
