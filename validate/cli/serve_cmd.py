"""``v41val serve``: the builtin runtime behind an OpenAI-compatible API (loopback by
default). Thin: parse flags into a ``ServeConfig``, call ``validate.engines.builtin_serve``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from validate.cli import app
from validate.cli.common import emit, fail


@app.command("serve")
def serve(
    preset: Optional[str] = typer.Option(None, "--preset",
                                         help="micro | tiny | mid | flash (random weights)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights (with --preset)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Checkpoint directory."),
    swa: str = typer.Option("exact", "--swa", help="exact | bounded"),
    encoder_replay: Optional[bool] = typer.Option(
        None, "--encoder-replay/--no-encoder-replay",
        help="Bounded replay after a prefix hit (default: on with --swa bounded)."),
    decoder_trim: Optional[bool] = typer.Option(
        None, "--decoder-trim/--no-decoder-trim",
        help="Trim layers after the cut to the last W rows (default: on with --swa bounded)."),
    cut: str = typer.Option("after", "--cut", help="after | at (where the decoder trim starts)."),
    kernels: str = typer.Option("reference", "--kernels",
                                help="reference | fused | +op,-op entries (runtime.kernels)."),
    replay_tokens: Optional[int] = typer.Option(None, "--replay-tokens",
                                                help="W of replay/trim (default: the window)."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda | cuda:N"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="float32 | bfloat16 | float16"),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback default)."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    model_name: Optional[str] = typer.Option(None, "--model-name", help="Served model id."),
    max_batch: int = typer.Option(8, "--max-batch", help="Requests decoded together."),
    check: bool = typer.Option(False, "--check",
                               help="Load the model, print the configuration, do not serve."),
    as_json: bool = typer.Option(False, "--json", help="With --check: one JSON document."),
) -> None:
    """Serve the builtin runtime over HTTP (/v1/completions, /v1/chat/completions)."""
    from runtime.options import RuntimeOptions
    from validate.engines.builtin_serve import ServeConfig, build_server, serve_forever
    from validate.engines.builtin_source import ModelSource

    if (preset is None) == (checkpoint is None):
        if checkpoint is None:
            preset = "tiny"
        else:
            fail("give either --preset or --checkpoint, not both")
    source = ModelSource(preset=preset, seed=seed,
                         checkpoint=None if checkpoint is None else str(checkpoint),
                         dtype=dtype, device=device)
    options = RuntimeOptions(swa=swa, encoder_replay=encoder_replay, decoder_trim=decoder_trim,
                             cut=cut, kernels=kernels, replay_tokens=replay_tokens)
    config = ServeConfig(source=source, options=options, host=host, port=port,
                         model_name=model_name, max_batch_requests=max_batch)
    document = {"url": f"http://{host}:{port}/v1", "model": config.served_name,
                "source": source.describe(),
                "options": {"swa": options.swa, "encoder_replay": options.encoder_replay,
                            "decoder_trim": options.decoder_trim, "cut": options.cut,
                            "kernels": options.kernels, "replay_tokens": options.replay_tokens},
                "max_batch": max_batch}
    if check:
        build_server(config)
        emit(as_json, document, lambda console: console.print(
            f"ok: would serve {config.served_name} at {document['url']} "
            f"(swa={options.swa}, encoder_replay={options.encoder_replay}, "
            f"decoder_trim={options.decoder_trim})"))
        return
    if not config.is_loopback:
        sys.stderr.write(f"v41val: warning: serving on {host}, reachable beyond this machine\n")
    sys.stderr.write(f"v41val: serving {config.served_name} at {document['url']} "
                     f"(swa={options.swa}); Ctrl-C stops\n")
    serve_forever(config)
