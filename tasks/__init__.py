"""GSM8K and GPQA tasks whose prompts and scoring match lm-eval 0.4.13, offline, and
the synthetic testbed tasks (``tasks.testbed``) in GSM8K's answer format.

Public API (kept small and stable; everything else is internal)::

    import tasks
    tasks.names() -> list[str]
    task = tasks.get("gsm8k")          # optional: data_dir=..., max_gen_toks=...
    tasks.info("gsm8k")               # TaskInfo: task.describe() without loading data
    task.name, task.version, task.kind, task.max_gen_toks, task.primary
    task.is_chat, task.text_is_shareable (False for GPQA: keep its text in memory)
    task.item("gsm8k-test-0042")
    for item in task.items():           # frozen; item.id (stable string), item.target
        request = task.render(item)     # tasks.request.Request
        score = task.score(item, tasks.Generation(text))   # or tasks.Loglikelihoods
        score.values, score.extracted, score.primary, score.invalid

Data ships in ``tasks/data`` and is sha256-checked on load; GPQA is read from its zip
in memory only. Versions and changes: ``tasks/CHANGELOG.md``.
"""

from tasks.registry import get, info, names
from tasks.request import ChatMessage, Generation, GenerationParams, Loglikelihoods, Request
from tasks.score import Score
from tasks.task import Task, TaskInfo

__all__ = [
    "ChatMessage",
    "Generation",
    "GenerationParams",
    "Loglikelihoods",
    "Request",
    "Score",
    "Task",
    "TaskInfo",
    "get",
    "info",
    "names",
]
