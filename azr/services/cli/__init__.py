"""The ``azr`` command line. Each command group lives in its own module and is registered here."""

from __future__ import annotations

import logging
import sys

import typer

app = typer.Typer(
    name="azr",
    help="Absolute Zero reasoner: self-play training with a sandboxed Python executor.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at DEBUG level."),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _register() -> None:
    from azr.services.cli import api, executor, pretrain, report, seed, selfplay
    from azr.services.cli import eval as eval_cli

    app.add_typer(executor.app, name="executor")
    app.add_typer(api.app, name="api")
    app.add_typer(seed.app, name="seed")
    app.command(name="selfplay")(selfplay.selfplay)
    app.command(name="pretrain")(pretrain.pretrain)
    app.command(name="eval")(eval_cli.eval_command)
    app.command(name="report")(report.report)


def main() -> None:
    # ``azr executor ...`` is started once per batch (and by other programs): it registers only its own
    # commands, so that its start-up does not pay for importing the training stack.
    if sys.argv[1:2] == ["executor"]:
        from azr.services.cli import executor

        app.add_typer(executor.app, name="executor")
    else:
        _register()
    app()
