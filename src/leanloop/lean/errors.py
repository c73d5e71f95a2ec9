"""Typed errors of the Lean boundary: each says in one line what went wrong and what to do next."""

from __future__ import annotations

from leanloop.errors import LeanloopError


def excerpt(value: object, limit: int = 200) -> str:
    """A value shown in an error message, cut to ``limit`` characters."""
    text = str(value).strip()
    return text if len(text) <= limit else text[:limit] + "..."


class LeanError(LeanloopError):
    """Base of every error raised by the Lean boundary."""


# -- projects and toolchains ----------------------------------------------------------------------


class NotALeanProject(LeanError):
    """The directory has no Lake project (no lakefile and no lean-toolchain)."""


class MissingToolchainFile(LeanError):
    """The project does not pin a Lean version (no lean-toolchain file)."""


class ToolchainNotFound(LeanError):
    """elan, lake or lean, or the toolchain a project pins, is not installed."""


class ServerNotFound(LeanError):
    """The Lean REPL or Pantograph executable was not found."""


class SandboxUnavailable(LeanError):
    """The sandbox of Lean processes cannot be set up here (no bubblewrap, no user namespaces,
    not Linux) and was not turned off; the process is not started."""


class BuildFailed(LeanError):
    """``lake build`` of the project failed."""


class CloneFailed(LeanError):
    """A repository could not be cloned or its commit checked out."""


# -- servers --------------------------------------------------------------------------------------


class ServerError(LeanError):
    """A request to a Lean server failed for a reason outside Lean's own answer; the server has
    been stopped and starts again on the next request."""


class ServerStartError(ServerError):
    """The server process could not be started or never said it was ready."""


class RequestTimeout(ServerError):
    """The server did not answer within the time allowed."""


class ServerCrashed(ServerError):
    """The server process ended (crash, killed, end of output) while a request was pending."""


class ProtocolError(ServerError):
    """The server answered something that is not a valid answer of its protocol."""


class MemoryLimitExceeded(ServerError):
    """The server process used more memory than allowed and was stopped."""


class StaleStateError(LeanError):
    """A proof state belongs to a server process that has since been restarted or closed."""


class LeanRequestError(LeanError):
    """Lean refused the request itself (unknown environment or proof state, bad input)."""


class Unsupported(LeanRequestError):
    """The Lean backend cannot do what was asked (its protocol lacks the feature, e.g. an
    infotree from Pantograph); nothing was sent."""
