"""The ``v41val`` command line. Thin: every command parses arguments, calls the
library and renders; no logic lives here. Each command group is its own module.

Command modules import the library inside their command functions, keeping at module
level only typer, rich and the constants their signatures show (``validate.defaults``):
every module is imported to build ``--help``, so one module-level import of the
statistics, reports or runtime would make every invocation, a usage error included,
pay for scipy, matplotlib or torch (``tests/validate/test_cli_startup.py`` checks)."""

from __future__ import annotations

import sys
import traceback

import typer

from v41val.cli.common import EXIT_INTERNAL, EXIT_USAGE, fail, is_user_error

app = typer.Typer(
    name="v41val",
    help="Accuracy-vs-speed validation for DeepSeek-V4.1 inference optimizations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    ctx.obj = {"debug": debug}


def _register_commands() -> None:
    """Import each command module; each adds its commands to ``app``."""
    from v41val.cli import commands  # noqa: F401
    from v41val.cli.help_format import use_plain_help

    use_plain_help(app)


def _cli_exception_types() -> tuple[tuple, tuple, tuple]:
    """(exit, abort, usage) exception classes. Typer >= 0.16 vendors click as
    ``typer._click`` and has its own Exit/Abort; older releases raise click's. Collect
    both so usage errors are caught whichever one raised them."""
    import importlib

    exits, aborts, usages = [typer.Exit], [typer.Abort], []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        exits += [getattr(mod, "Exit", typer.Exit)]
        aborts += [getattr(mod, "Abort", typer.Abort)]
        usages += [mod.ClickException]
    return tuple(exits), tuple(aborts), tuple(usages)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point enforcing the exit-code and one-line-error rules."""
    _register_commands()
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    exit_types, abort_types, usage_types = _cli_exception_types()
    try:
        result = app(args=args, prog_name="v41val", standalone_mode=False)
    except exit_types as exc:
        raise SystemExit(exc.exit_code) from None
    except abort_types:
        fail("aborted", EXIT_USAGE)
    except usage_types as exc:
        fail(exc.format_message(), EXIT_USAGE)
    except SystemExit:
        raise
    except Exception as exc:
        if debug:
            traceback.print_exc()
        if is_user_error(exc):
            fail(str(exc), EXIT_USAGE)
        if not debug:
            sys.stderr.write(
                f"v41val: internal error: {type(exc).__name__}: {exc} (rerun with --debug)\n"
            )
        raise SystemExit(EXIT_INTERNAL) from None
    # standalone_mode=False returns a command's int return value instead of exiting.
    if isinstance(result, int) and result != 0:
        raise SystemExit(result)
