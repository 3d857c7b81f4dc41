"""The chat template of the builtin runtime (random-weight models have no template of
their own, so one simple, documented rendering is used everywhere: by ``v41val serve``'s
/v1/chat/completions and by the in-process ``builtin`` engine, so both see the same
prompt text for the same messages).

Rendering: every message becomes ``"<Role>: <content>\\n\\n"`` (Role is ``System``,
``User`` or ``Assistant``), and the prompt ends with ``"Assistant:"`` so the model
writes the assistant's turn. Example::

    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    -> "System: Be brief.\\n\\nUser: 2+2?\\n\\nAssistant:"

Role ``developer`` (OpenAI's newer name for system instructions) renders as ``System``.
Without the generation prompt (``add_generation_prompt=False``, as vLLM's
/tokenize takes it) the trailing ``"Assistant:"`` is left out. ``JINJA_TEMPLATE`` is the
same rendering as a Jinja chat template, served by ``/tokenizer_info`` for clients that
render chats themselves (lm-eval's remote tokenizer); a test renders it with Jinja and
compares it with ``render_chat``.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.server.errors import ChatTemplateError

ROLES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
GENERATION_PROMPT = "Assistant:"
JINJA_TEMPLATE = (
    "{%- set names = {'system': 'System', 'developer': 'System', 'user': 'User', "
    "'assistant': 'Assistant'} -%}"
    "{%- for message in messages -%}"
    "{{ names[message['role']] + ': ' + message['content'] + '\\n\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}Assistant:{%- endif -%}")


def render_chat(messages: Iterable[tuple[str, str]], add_generation_prompt: bool = True) -> str:
    """Prompt text for ``(role, content)`` pairs (see the module doc)."""
    parts = []
    for k, (role, content) in enumerate(messages):
        if role not in ROLES:
            raise ChatTemplateError(f"messages[{k}].role: expected one of {sorted(ROLES)}, "
                                    f"got {role!r}")
        if not isinstance(content, str):
            raise ChatTemplateError(f"messages[{k}].content: expected a string")
        parts.append(f"{ROLES[role]}: {content}\n\n")
    if not parts:
        raise ChatTemplateError("messages: expected at least one message")
    return "".join(parts) + (GENERATION_PROMPT if add_generation_prompt else "")
