"""Every command's ``--help`` in the usual spelling: arguments as ``PLAN`` in the usage
line (typer 0.2x writes ``{plan}``), no type after a plain flag (typer 0.28+ writes
``--json <bool>``), and the type still shown after an option that takes a value.

The expectation is built from the click command tree itself (each parameter's name,
``required``, ``nargs``, ``is_flag``), not from a stored copy of the help text.
"""

from __future__ import annotations

import re

import pytest
import typer

from v41val.cli import _register_commands, app, main


def _commands() -> list[tuple[list[str], object]]:
    _register_commands()
    root = typer.main.get_command(app)
    out = []

    def walk(path: list[str], cmd) -> None:
        out.append((path, cmd))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk([*path, name], sub)

    walk([], root)
    return out


COMMANDS = _commands()


def _expected_usage(path: list[str], cmd) -> str:
    pieces = ["[OPTIONS]"]
    for p in cmd.params:
        if p.param_type_name != "argument":
            continue
        name = p.name.upper() + ("..." if p.nargs != 1 else "")
        pieces.append(name if p.required else f"[{name}]")
    if hasattr(cmd, "commands"):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(["Usage: v41val", *path, *pieces])


def _help(path: list[str], capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    with pytest.raises(SystemExit) as exc:
        main([*path, "--help"])
        raise SystemExit(0)
    assert exc.value.code in (0, None)
    return capsys.readouterr().out


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) or "v41val" for p, _ in COMMANDS])
def test_help_spells_arguments_and_flags_plainly(path, cmd, capsys, monkeypatch):
    text = _help(path, capsys, monkeypatch)
    usage = next(line.strip() for line in text.splitlines() if "Usage:" in line)
    assert usage == _expected_usage(path, cmd)
    assert "{" not in usage
    for p in cmd.params:
        if p.param_type_name != "option" or p.hidden:
            continue
        longest = max(p.opts, key=len)
        row = re.search(re.escape(longest) + r"(?:/\S+)?\s+(\S+)", text)
        assert row is not None, f"{longest} missing from the help of {path}"
        if p.is_flag:
            assert not row.group(1).startswith("<"), f"{longest} shows a type: {row.group(0)}"
    value_options = [p for p in cmd.params
                     if p.param_type_name == "option" and not p.is_flag and not p.hidden]
    for p in value_options[:1]:  # an option with a value keeps its type
        longest = max(p.opts, key=len)
        assert re.search(re.escape(longest) + r"\s+<", text), f"{longest} lost its type"
