from __future__ import annotations

import click
from click.testing import CliRunner

from server.cli import main
from server.cli.serve import client_config
from server.settings import Settings, default_db_path, resolve_db


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
    return found


def test_every_command_has_help() -> None:
    runner = CliRunner()
    for name, command in _commands(main):
        assert command.help, name
        result = runner.invoke(main, [*name.split(), "--help"])
        assert result.exit_code == 0, name
        assert "Usage:" in result.output


def test_database_location_precedence() -> None:
    env = {"XDG_DATA_HOME": "/data", "CHRONOMEM_DB": "/env.db"}
    assert resolve_db("/flag.db", env) == "/flag.db"
    assert resolve_db(None, env) == "/env.db"
    assert resolve_db(None, {"XDG_DATA_HOME": "/data"}) == "/data/chronomem/memory.db"
    assert str(default_db_path({})).endswith(".local/share/chronomem/memory.db")


def test_client_configuration_to_paste() -> None:
    settings = Settings(db="/m.db", app="desk", user="me", project="p")
    stdio = client_config("stdio", "127.0.0.1", 8765, settings)["mcpServers"]["chronomem"]
    assert stdio == {
        "command": "chronomem",
        "args": ["serve", "--db", "/m.db"],
        "env": {"CHRONOMEM_APP": "desk", "CHRONOMEM_USER": "me", "CHRONOMEM_PROJECT": "p"},
    }
    http = client_config("http", "::1", 9000, Settings(db="/m.db", auth_tokens="t.json"))
    entry = http["mcpServers"]["chronomem"]
    assert entry["url"] == "http://[::1]:9000/mcp" and "Authorization" in entry["headers"]
    assert client_config("sse", "127.0.0.1", 1, settings)["mcpServers"]["chronomem"]["url"] == (
        "http://127.0.0.1:1/sse"
    )


def test_stdio_with_auth_tokens_is_a_usage_error(tmp_path) -> None:
    result = CliRunner().invoke(
        main, ["serve", "--auth-tokens", str(tmp_path / "t.json"), "--db", str(tmp_path / "m")]
    )
    assert result.exit_code == 2
    assert "--auth-tokens applies to --transport sse or http" in result.output


def test_only_loopback_addresses_count_as_loopback() -> None:
    from server.settings import is_loopback

    for host in ("127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.10", "127.evil.example", "example.com", ""):
        assert not is_loopback(host), host


def test_the_command_line_loads_without_the_mcp_sdk() -> None:
    """Every CLI command starts a process: loading the SDK cost each one ~0.7 s (the
    `serve` command loads it when it serves)."""
    import subprocess
    import sys

    probe = "import sys, server.cli; print(sorted(m for m in sys.modules if m == 'mcp'))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_each_module_of_the_command_line_imports_alone() -> None:
    """Modules that import each other fail when the wrong one is imported first: each
    is imported first here, in a fresh interpreter."""
    import pkgutil
    import subprocess
    import sys

    import server.cli

    names = [f"server.cli.{m.name}" for m in pkgutil.iter_modules(server.cli.__path__)]
    assert {"server.cli.options", "server.cli.operations", "server.cli.admin"} <= set(names)
    for name in ["server.cli", *(n for n in names if n != "server.cli.__main__")]:
        done = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True
        )
        assert done.returncode == 0, (name, done.stderr)
