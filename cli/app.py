"""The ``livebytes`` command: the app, assembled from the command modules (``cli/commands``, each registered under its
``NAME`` in the order of ``commands.COMMANDS``). A command parses its options (the query options declared once in
``options``), calls the library (``livebytes.calls``, the Python API's own calls), renders (``render``) or prints JSON
(``livebytes.report``). Errors are not caught here: ``errors.LivebytesGroup`` gives every command one error path (one
line on stderr; exit 1 domain, 2 usage, 3 failed validation).
"""
from __future__ import annotations

import typer

from .commands import modules
from .errors import LivebytesGroup

app = typer.Typer(cls=LivebytesGroup, add_completion=True, invoke_without_command=True, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Peak memory of fused attention kernels, predicted from buffer lifetimes and checked on GPUs.")


def _version(value: bool) -> None:
    if value:
        # deferred: importlib.metadata ~11 ms (importtime), which every import of livebytes and the CLI's start would pay
        from importlib.metadata import version
        typer.echo(f"livebytes {version('livebytes')}")
        raise typer.Exit()


@app.callback()
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Peak memory of fused attention kernels, predicted from buffer lifetimes and checked on GPUs."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


for _command in modules():
    app.command(_command.NAME)(_command.command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
