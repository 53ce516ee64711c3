"""The typer application every command registers on, and its one-line error handling."""

from __future__ import annotations

from typing import Annotated

import typer

from verifyprof.cli.args import _Group

app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help=(
        "What is inside the speculative-decoding verify step, and which fix is worth the most"
        " tokens/s."
    ),
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"verifyprof {version('verifyprof')}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the version and exit", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """What is inside the speculative-decoding verify step, and which fix is worth the most
    tokens/s."""
