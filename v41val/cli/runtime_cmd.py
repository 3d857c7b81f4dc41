"""``v41val init-checkpoint`` and ``v41val bench kv``: the runtime's own commands.

Thin: parse, call ``runtime``, render.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from v41val.cli import app
from v41val.cli.common import emit

bench_app = typer.Typer(help="Measurements of the runtime (cache bytes, ...).", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("kv")
def bench_kv(
    preset: str = typer.Option("flash", "--preset", help="tiny | mid | flash"),
    block_tokens: int = typer.Option(64, "--block-tokens", min=1,
                                     help="Prefix-cache block size, for the cached-token cost."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """KV-cache bytes per token and per sequence, derived from the config, and what a
    prefix cache holds per cached token in exact and bounded-replay mode."""
    from runtime.config import V41Config
    from runtime.kv_bytes import kv_bytes_per_token

    kv = kv_bytes_per_token(V41Config.preset(preset))
    cached = {mode: kv.prefix_cache_bytes_per_token(mode == "exact", block_tokens)
              for mode in ("exact", "bounded")}
    document = {"preset": preset, **kv.as_dict(),
                "prefix_cache_bytes_per_cached_token": {**cached, "block_tokens": block_tokens}}

    def render(console) -> None:
        table = Table(title=f"KV cache bytes ({preset})")
        table.add_column("cache")
        table.add_column("bytes", justify="right")
        table.add_column("scope")
        table.add_row("SWA entry (FP8 e4m3 + ue8m0/32)", str(kv.swa_entry_bytes),
                      f"per token per layer, last {kv.sliding_window}, {kv.swa_layers} layers")
        table.add_row("global main KV (NVFP4 e2m1 + e4m3/16)", str(kv.global_entry_bytes),
                      "per compressed entry per KV source")
        table.add_row("indexer key (MXFP4 e2m1 + ue8m0/32)", str(kv.index_entry_bytes),
                      "per compressed entry per KV source")
        for s in kv.sources:
            table.add_row(f"  source layer {s.layer} (ratio {s.ratio})", f"{s.bytes_per_token:g}",
                          f"per token ({s.record_bytes} B / {s.ratio})")
        table.add_row("persistent global + indexer KV", f"{kv.persistent_bytes_per_token:g}",
                      "per token")
        table.add_row("SWA, all layers", str(kv.swa_bytes_per_sequence), "per sequence (constant)")
        table.add_row("compressor partial groups", str(kv.compressor_state_bytes_per_sequence),
                      "per sequence (float32)")
        table.add_row("prefix cache, exact SWA", f"{cached['exact']:g}",
                      f"per cached token ({block_tokens}-token blocks keep their window state)")
        table.add_row("prefix cache, bounded replay", f"{cached['bounded']:g}",
                      "per cached token (persistent KV only)")
        console.print(table)

    emit(as_json, document, render)


@app.command("init-checkpoint")
def init_checkpoint(
    directory: Path = typer.Argument(..., help="Directory to write (created if missing)."),
    preset: str = typer.Option("tiny", "--preset", help="tiny | mid | flash"),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    weight_format: str = typer.Option(
        "release", "--format", help="release (FP8/FP4 where the release uses them) | unquantized"
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """Write a random-weight checkpoint (safetensors + config.json) in the released naming."""
    from runtime.checkpoint import init_random_checkpoint

    summary = init_random_checkpoint(directory, preset=preset, seed=seed, weight_format=weight_format)

    def render(console) -> None:
        console.print(
            f"wrote {summary['tensors']} tensors ({summary['bytes']:,} bytes, "
            f"{summary['weight_format']}) to {summary['directory']}"
        )

    emit(as_json, summary, render)
