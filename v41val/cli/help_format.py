"""The help text in the usual Unix spelling, whatever typer release is installed.

Typer releases that vendor click (0.2x) write a required argument as ``{plan}`` in the
usage line, and from 0.28 a ``<bool>`` type after every plain flag (``--json <bool>``),
which reads as if the flag took a value. Both are presentation only, so the command
line fixes them here, once, for every command and group: an argument is written
``PLAN`` (``[PLAN]`` when optional, ``PLAN...`` when it takes several), and a flag
shows no type. ``tests/validate/test_cli_help.py`` checks the rendered help.
"""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup


def _usage_piece(param) -> list[str]:
    if getattr(param, "param_type_name", "") != "argument":
        return []  # options: [OPTIONS] stands for them
    name = (param.metavar or param.name or "").upper()
    if param.nargs != 1:
        name += "..."
    return [name if param.required else f"[{name}]"]


def _quiet_flags(params: list) -> list:
    """A flag (``--json``, ``--no-x``) takes no value: give it an empty metavar so no
    type is shown after it (typer shows the metavar instead of the type when set)."""
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


class _PlainHelp:
    """Mixed into typer's command and group classes (see the module doc)."""

    def get_params(self, ctx):
        return _quiet_flags(super().get_params(ctx))

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            pieces += _usage_piece(param)
        if isinstance(self, TyperGroup):
            pieces.append(self.subcommand_metavar)
        return pieces


class PlainHelpCommand(_PlainHelp, TyperCommand):
    pass


class PlainHelpGroup(_PlainHelp, TyperGroup):
    pass


def _unset(cls) -> bool:
    """No class of its own: None, typer's ``Default(None)`` placeholder, or typer's base."""
    return getattr(cls, "value", cls) in (None, TyperCommand, TyperGroup)


def use_plain_help(app: typer.Typer) -> None:
    """Give ``app``, its commands and its sub-groups (recursively) the plain help
    classes, unless one chose its own class."""
    if _unset(app.info.cls):
        app.info.cls = PlainHelpGroup
    for info in app.registered_commands:
        if _unset(info.cls):
            info.cls = PlainHelpCommand
    for group in app.registered_groups:
        if _unset(group.cls):
            group.cls = PlainHelpGroup
        if group.typer_instance is not None:
            use_plain_help(group.typer_instance)
