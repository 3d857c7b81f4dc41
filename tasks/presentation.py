"""JSON-safe views of tasks and requests for the CLI and reports.

GPQA text policy lives here, not in the CLI: GPQA question and choice text never enter
a document meant for machines (files, logs, CI artifacts). Such documents carry the
item id, the choice permutation, the answer letter and the prompt's sha256 instead;
only an interactive terminal may show the text itself.
"""

from __future__ import annotations

from typing import Any

from tasks.gpqa_data import GpqaItem
from tasks.task import Task


def text_is_shareable(task: Task) -> bool:
    """False for GPQA, whose authors ask that its text never appears in plain text."""
    return task.text_is_shareable


def request_document(task: Task, item: Any) -> dict:
    """Everything about one rendered item that may be written anywhere."""
    request = task.render(item)
    doc = {
        "task": task.name,
        "version": task.version,
        "item_id": item.id,
        "kind": request.kind,
        "chat": request.messages is not None,
        "target": item.target,
        "prompt_sha256": request.prompt_sha256,
        "gen": None if request.gen is None else request.gen.to_dict(),
        "continuations": list(request.continuations),
    }
    if isinstance(item, GpqaItem):
        doc["choice_permutation"] = list(item.permutation)
        doc["answer_index"] = item.answer_index
    if text_is_shareable(task):
        doc["prompt"] = request.prompt
        doc["messages"] = (None if request.messages is None
                           else [{"role": m.role, "content": m.content} for m in request.messages])
    return doc
