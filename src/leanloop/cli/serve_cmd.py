"""``leanloop serve``: run the model server (Lean Copilot's API, Kimina's /verify, the OpenAI chat
API for local models, the playground page) for the models a configuration file names."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from leanloop.cli.common import err_console, user_path
from leanloop.errors import LeanloopError


def serve(
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        help="The server's YAML/JSON configuration [default: $LEANLOOP_SERVE_CONFIG].",
        show_default=False,
    ),
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on [default: the config's, 127.0.0.1]."
    ),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, help="Port [default: the config's, 23337]."
    ),
    access_log: bool = typer.Option(
        True, "--access-log/--no-access-log", help="Log a line for every request."
    ),
) -> None:
    """Serve models over HTTP (see docs/serving.md); stop with Ctrl-C or SIGTERM: queued requests
    get 503, those running have the configured shutdown_timeout to finish."""
    import uvicorn

    from leanloop.serve.application import create_app
    from leanloop.serve.config import ServeConfig
    from leanloop.serve.sources import check_sources
    from leanloop.settings import Settings

    path = user_path(config) if config is not None else Settings.from_env().serve_config
    if path is None:
        raise LeanloopError(
            "no server configuration given",
            hint="pass --config FILE or set LEANLOOP_SERVE_CONFIG (docs/serving.md has an example)",
        )
    settings = ServeConfig.load(path)
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = settings.model_copy(update=overrides)
    check_sources(settings, str(path))  # a model that is not there: one line, before uvicorn
    err_console.print(
        f"serving {len(settings.models)} model(s) from {path} on "
        f"http://{settings.host}:{settings.port}",
        highlight=False,
    )
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            # whole seconds; the server ends what runs after shutdown_timeout itself, this is
            # uvicorn's own limit behind it
            timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout) + 1,
            access_log=access_log,
            log_level="info",
        )
    )
    server.run()
    if not server.started:
        raise typer.Exit(1)
