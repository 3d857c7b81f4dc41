"""Engines for a plan's variants: one factory per run, one engine per variant.

``EngineFactory.open(variant)`` is a context manager yielding an ``Engine``; leaving it
releases what the variant held (a vLLM server is stopped, its log kept).
``EngineFactory.sweep(variant, speed)`` is one yielding ``level -> Engine`` for the
headline concurrency sweep: a fresh engine per level holding ``level`` requests in
flight, on the same weights / endpoint / server for every level. The builtin
factory shares one weights pool across variants, so every variant of a run reads the
same weights (docs/design.md, principle 2). Tests pass their own factory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from validate.engines.base import Engine
from validate.plan.load import CLIENT_KEYS
from validate.plan.schema import Plan, VariantSpec


class EngineFactory(Protocol):
    kind: str

    def open(self, variant: VariantSpec) -> contextlib.AbstractContextManager[Engine]: ...

    def sweep(self, variant: VariantSpec,
              speed) -> contextlib.AbstractContextManager[Callable[[int], Engine]]: ...


def _client_settings(plan: Plan) -> dict:
    settings = {k: v for k, v in plan.engine.settings.items() if k in CLIENT_KEYS}
    return {"concurrency": plan.concurrency, **settings}


def _sweep_clients(base_url: str, model: str, client: dict, speed) -> Callable[[int], Engine]:
    """``level -> OpenAIEngine`` holding ``level`` requests in flight, with vLLM/SGLang's
    ``ignore_eos`` in every body when the [speed] table asks for it."""
    from validate.engines.openai import OpenAIEngine
    from validate.engines.openai_config import OpenAIEngineConfig

    extra = dict(client.get("extra_body", {}))
    if speed.ignore_eos:
        extra["ignore_eos"] = True
    settings = {**client, "extra_body": extra}

    def at(level: int) -> Engine:
        return OpenAIEngine(OpenAIEngineConfig(base_url=base_url, model=model,
                                               **{**settings, "concurrency": level}))

    return at


class OpenAIFactory:
    """Each variant is an endpoint: the plan's base_url/model unless the variant
    overrides them."""

    kind = "openai"

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def endpoint(self, variant: VariantSpec) -> tuple[str, str]:
        """(base_url, model) of ``variant``: its own, else the plan's."""
        s = self.plan.engine.settings
        return (variant.endpoint.get("base_url", s["base_url"]),
                variant.endpoint.get("model", s["model"]))

    def config(self, variant: VariantSpec):
        from validate.engines.openai_config import OpenAIEngineConfig

        base_url, model = self.endpoint(variant)
        return OpenAIEngineConfig(base_url=base_url, model=model, **_client_settings(self.plan))

    check = config

    @contextlib.contextmanager
    def open(self, variant: VariantSpec) -> Iterator[Engine]:
        from validate.engines.openai import OpenAIEngine

        yield OpenAIEngine(self.config(variant))

    @contextlib.contextmanager
    def sweep(self, variant: VariantSpec, speed) -> Iterator[Callable[[int], Engine]]:
        yield _sweep_clients(*self.endpoint(variant), _client_settings(self.plan), speed)


class VllmFactory:
    """Each variant is a vLLM server started with the common flags and its own."""

    kind = "vllm"

    def __init__(self, plan: Plan, workspace: Path) -> None:
        self.plan = plan
        self.workspace = workspace
        self._probed = False

    def launch_config(self, variant: VariantSpec):
        """The server of ``variant``: common flags then the variant's, its log kept in
        the workspace under the variant's name. A warm plan asks for prefix caching
        explicitly (its priming pass exists for the hits; a variant's
        ``--no-enable-prefix-caching`` still turns it off)."""
        from validate.engines.vllm_config import VllmLaunchConfig

        s = self.plan.engine.settings
        launch = {k: s[k] for k in ("python", "launcher", "served_model_name",
                                    "startup_timeout_s") if k in s}
        return VllmLaunchConfig(model=s["model"], common_args=tuple(s.get("common_args", ())),
                                variant_args=tuple(variant.args), env=dict(variant.env),
                                log_dir=str(self.workspace / "vllm-logs"), label=variant.name,
                                prefix_caching=True if self.plan.warm else None, **launch)

    def check(self, variant: VariantSpec) -> None:
        """The launch and the client settings, built (and so checked) without a server;
        the environment's python is probed for vLLM once (``resolve_launch``)."""
        from validate.engines.openai_config import OpenAIEngineConfig
        from validate.engines.vllm import resolve_launch

        launch = self.launch_config(variant)
        if not self._probed:
            resolve_launch(launch)
            self._probed = True
        OpenAIEngineConfig(base_url="http://127.0.0.1", model=self.plan.engine.settings["model"],
                           **_client_settings(self.plan))

    @contextlib.contextmanager
    def open(self, variant: VariantSpec) -> Iterator[Engine]:
        from validate.engines.vllm import VllmEngine

        engine = VllmEngine(self.launch_config(variant), client=_client_settings(self.plan))
        with engine:
            yield engine

    @contextlib.contextmanager
    def sweep(self, variant: VariantSpec, speed) -> Iterator[Callable[[int], Engine]]:
        """The variant's server again (its quality pass has stopped it), one client per level."""
        from validate.engines.vllm import VllmServer

        launch = self.launch_config(variant)
        with VllmServer(launch) as server:
            yield _sweep_clients(server.base_url, launch.request_model_name,
                                 _client_settings(self.plan), speed)


class BuiltinFactory:
    """The runtime in process (``validate.engines.builtin``); one weights pool per run.
    Its engines prime themselves (``BuiltinEngine.prime``: prefill only, no output)."""

    kind = "builtin"

    def __init__(self, plan: Plan) -> None:
        from validate.engines import builtin

        self.plan = plan
        self._module = builtin
        self._pool = builtin.WeightsPool()

    def check(self, variant: VariantSpec) -> None:
        """The variant's engine configuration, built without loading weights; reading
        the source's model config also checks a checkpoint's config.json."""
        self._module.config_for_plan(self.plan.engine.settings, variant.runtime_options(),
                                     perturb=dict(variant.perturb),
                                     concurrency=self.plan.concurrency, seed=self.plan.seed,
                                     variant=variant.name, warm=self.plan.warm).source.config()

    @contextlib.contextmanager
    def open(self, variant: VariantSpec) -> Iterator[Engine]:
        engine = self._module.engine_for_plan(self.plan.engine.settings, variant.runtime_options(),
                                              perturb=dict(variant.perturb),
                                              concurrency=self.plan.concurrency,
                                              seed=self.plan.seed, pool=self._pool,
                                              variant=variant.name, warm=self.plan.warm)
        try:
            yield engine
        finally:
            close = getattr(engine, "close", None)
            if close is not None:
                close()

    @contextlib.contextmanager
    def sweep(self, variant: VariantSpec, speed) -> Iterator[Callable[[int], Engine]]:
        yield lambda level: self.sweep_engine(variant, level)

    def sweep_engine(self, variant: VariantSpec, concurrency: int) -> Engine:
        """A fresh engine of ``variant`` holding ``concurrency`` requests in flight, for
        the headline sweep: same weights pool, EOS ignored (every variant produces the
        same number of tokens), no warm priming (synthetic prompts are distinct)."""
        settings = {k: v for k, v in self.plan.engine.settings.items()
                    if k != "max_batch_requests"}
        return self._module.engine_for_plan(settings, variant.runtime_options(),
                                            perturb=dict(variant.perturb),
                                            concurrency=concurrency, seed=self.plan.seed,
                                            pool=self._pool, variant=variant.name,
                                            warm=False, ignore_eos=True)


def check_engines(plan: Plan, factory: EngineFactory) -> None:
    """Build every variant's engine configuration (nothing started, nothing loaded),
    so a bad setting (a dtype, a device this machine lacks, a negative timeout) fails in
    one line naming the plan and the variant before the first write to the store."""
    from validate.errors import PlanError

    check = getattr(factory, "check", None)
    if check is None:  # a test's own factory
        return
    for variant in plan.variants:
        try:
            check(variant)
        except (ValueError, OSError) as exc:
            if not is_input_error(exc):
                raise
            raise PlanError(f"{plan.source}: variants.{variant.name}: {exc}") from None


def is_input_error(exc: BaseException) -> bool:
    """An error class declared by one of v41val's packages (their input errors)."""
    return type(exc).__module__.split(".")[0] in ("runtime", "tasks", "validate")


def factory_for(plan: Plan, workspace: Path) -> EngineFactory:
    if plan.engine.kind == "openai":
        return OpenAIFactory(plan)
    if plan.engine.kind == "vllm":
        return VllmFactory(plan, workspace)
    return BuiltinFactory(plan)
