"""Turn a plan into the requests it wants answered: variants x tasks x items x repeats.

Every variant gets byte-identical requests for an (item, repeat) (pairs are the same
prompt and the same parameters: docs/design.md, principle 1). Repeat r carries the seed
``plan.seed + r`` so sampled repeats differ from each other and reproduce across runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import tasks as task_registry
from tasks.request import Request
from tasks.task import Task
from validate.plan.schema import Plan, TaskSpec
from validate.store import PlannedRequest


def load_tasks(plan: Plan) -> dict[str, Task]:
    """Each plan task, loaded once with its generation-budget override."""
    return {spec.name: task_registry.get(spec.name, max_gen_toks=spec.max_gen_toks)
            for spec in plan.tasks}


def selected_items(task: Task, spec: TaskSpec) -> tuple:
    if spec.items is not None:
        return tuple(task.item(item_id) for item_id in spec.items)
    items = task.items()
    return items if spec.limit is None else items[: spec.limit]


def _with_overrides(request: Request, spec: TaskSpec, seed: int) -> Request:
    if request.gen is None:
        return request
    gen = replace(request.gen, seed=seed)
    if spec.temperature is not None:
        gen = replace(gen, temperature=spec.temperature, do_sample=spec.temperature > 0)
    if spec.top_p is not None:
        gen = replace(gen, top_p=spec.top_p)
    return replace(request, gen=gen)


def planned_requests(plan: Plan, loaded: Mapping[str, Task],
                     variant: str) -> list[PlannedRequest]:
    """The requests of one variant, task by task, item by item, repeat by repeat."""
    out = []
    for spec in plan.tasks:
        task = loaded[spec.name]
        for item in selected_items(task, spec):
            rendered = task.render(item)
            for repeat in range(spec.repeats):
                request = _with_overrides(rendered, spec, plan.seed + repeat)
                out.append(PlannedRequest(variant=variant, repeat=repeat, request=request,
                                          store_text=task.text_is_shareable))
    return out


def priming_request(request: Request) -> Request:
    """The warm-mode copy of a request: same prompt, one output token, so the engine's
    prefix cache holds the prompt when the measured request arrives."""
    if request.gen is None:
        return request
    return replace(request, gen=replace(request.gen, max_gen_toks=1))
