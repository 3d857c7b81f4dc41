"""``python -m training train|export``: the trainer's command line (the device runs it).

    python -m training train --recipe training/recipes/testbed.toml --run runs/tb \\
        --device cuda --max-seconds 540          # call again to continue
    python -m training export --recipe ... --run runs/tb --out runtime/testbed
"""

from __future__ import annotations

import argparse
import json
import sys

from runtime.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train (or continue) a run")
    t.add_argument("--recipe", required=True)
    t.add_argument("--run", required=True, help="run folder (state, log)")
    t.add_argument("--device", default="cuda")
    t.add_argument("--max-seconds", type=float, default=None)
    e = sub.add_parser("export", help="write the testbed checkpoint folder")
    e.add_argument("--recipe", required=True)
    e.add_argument("--run", required=True)
    e.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from training.recipe import load_recipe

    try:
        recipe = load_recipe(args.recipe)
        if args.command == "train":
            from training.loop import train

            result = train(recipe, args.run, device=args.device, max_seconds=args.max_seconds)
        else:
            from training.export import export_testbed

            result = export_testbed(args.run, recipe, args.recipe, args.out)
    except ConfigError as exc:
        print(f"training: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
