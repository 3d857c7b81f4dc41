"""``v41val serve``: the builtin runtime behind an OpenAI-compatible API (loopback by
default). Thin: parse flags into a ``ServeConfig``, call ``validate.engines.builtin_serve``.

The runtime-option flags are not written here: ``option_parameters`` makes one per
``RuntimeOptions`` switch from its description (``runtime.options.Switch``: flag, type,
help), so a new switch is a new flag with no edit here. ``serve_command(options_type)``
builds the command for a ``RuntimeOptions`` subclass too (the test of that adds one).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Optional

import typer

from runtime.options import RuntimeOptions, switches
from v41val.cli import app
from v41val.cli.common import emit, fail


def option_parameters(options_type: type = RuntimeOptions) -> list[inspect.Parameter]:
    """One keyword parameter (a typer option) per switch of ``options_type``."""
    params = []
    for name, sw in switches(options_type).items():
        flag = sw.cli_flag(name)
        default = getattr(options_type, name, None)
        if sw.kind is bool:
            decls = [f"{flag}/--no-{flag[2:]}"]
            annotation = Optional[bool] if sw.optional else bool
        else:
            decls = [flag]
            annotation = Optional[sw.kind] if sw.optional else sw.kind
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
            default=typer.Option(default, *decls, help=sw.help)))
    return params


def serve_command(options_type: type = RuntimeOptions):
    """The ``serve`` command function for ``options_type`` (register it on a typer app)."""
    option_names = tuple(switches(options_type))

    def serve(
        preset: Optional[str] = typer.Option(None, "--preset",
                                             help="micro | tiny | mid | flash (random weights)."),
        seed: int = typer.Option(0, "--seed", help="Seed of the random weights (with --preset)."),
        checkpoint: Optional[Path] = typer.Option(None, "--checkpoint",
                                                  help="Checkpoint directory."),
        device: str = typer.Option("cpu", "--device", help="cpu | cuda | cuda:N"),
        dtype: Optional[str] = typer.Option(None, "--dtype", help="float32 | bfloat16 | float16"),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback default)."),
        port: int = typer.Option(8000, "--port", help="TCP port."),
        model_name: Optional[str] = typer.Option(None, "--model-name", help="Served model id."),
        max_batch: int = typer.Option(8, "--max-batch", help="Requests decoded together."),
        check: bool = typer.Option(False, "--check",
                                   help="Load the model, print the configuration, do not serve."),
        as_json: bool = typer.Option(False, "--json", help="With --check: one JSON document."),
        **option_values,
    ) -> None:
        """Serve the builtin runtime over HTTP (/v1/completions, /v1/chat/completions)."""
        _serve(options_type(**{k: option_values[k] for k in option_names}), preset=preset,
               seed=seed, checkpoint=checkpoint, device=device, dtype=dtype, host=host,
               port=port, model_name=model_name, max_batch=max_batch, check=check,
               as_json=as_json)

    fixed = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
             for p in inspect.signature(serve).parameters.values()
             if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params = fixed + option_parameters(options_type)
    serve.__signature__ = inspect.Signature(params)
    serve.__annotations__ = {p.name: p.annotation for p in params}
    return serve


def _serve(options, *, preset, seed, checkpoint, device, dtype, host, port, model_name,
           max_batch, check, as_json) -> None:
    from runtime.scheduling import EngineConfig
    from validate.engines.builtin_serve import ServeConfig, bind, build_server, serve_forever
    from validate.engines.builtin_source import ModelSource

    if (preset is None) == (checkpoint is None):
        if checkpoint is None:
            preset = "tiny"
        else:
            fail("give either --preset or --checkpoint, not both")
    source = ModelSource(preset=preset, seed=seed,
                         checkpoint=None if checkpoint is None else str(checkpoint),
                         dtype=dtype, device=device)
    config = ServeConfig(source=source, options=options, host=host, port=port,
                         model_name=model_name,
                         scheduling=EngineConfig(max_batch_requests=max_batch))
    document = {"url": f"http://{host}:{port}/v1", "model": config.served_name,
                "source": source.describe(), "options": options.to_dict(),
                "max_batch": max_batch}
    if check:
        build_server(config)
        emit(as_json, document, lambda console: console.print(
            f"ok: would serve {config.served_name} at {document['url']} "
            f"(swa={options.swa}, encoder_replay={options.encoder_replay}, "
            f"decoder_trim={options.decoder_trim})"))
        return
    sock = bind(host, port)  # a port in use fails here, before the model loads
    if not config.is_loopback:
        sys.stderr.write(f"v41val: warning: serving on {host}, reachable beyond this machine\n")
    sys.stderr.write(f"v41val: serving {config.served_name} at {document['url']} "
                     f"(swa={options.swa}); Ctrl-C stops\n")
    serve_forever(config, sock=sock)


app.command("serve")(serve_command())
