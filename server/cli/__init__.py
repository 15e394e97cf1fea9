"""The `chronomem` command line.

Each module holds commands and `main` gathers them, so the imports run one way:
this group, then `serve`, `operations` and `admin`, then the `options` they share.
"""

from __future__ import annotations

import click

from . import admin, operations, serve

__all__ = ["main"]


@click.group()
@click.version_option(package_name="chronomem")
def main() -> None:
    """chronomem: a bi-temporal knowledge-graph memory for AI agents, in one SQLite file."""


main.add_command(serve.serve)
main.add_command(serve.token)
for command in (*operations.COMMANDS, *admin.COMMANDS):
    main.add_command(command)
