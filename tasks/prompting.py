"""Plain-text prompt assembly with lm-eval 0.4.13's layout.

lm-eval builds a text prompt from messages: the description (if any, no delimiter),
then per exemplar ``question + target_delimiter + answer + fewshot_delimiter``, then the
test question with nothing after it (so a prompt ends at e.g. ``Answer:``). Defaults
are lm-eval's ``target_delimiter=" "`` and ``fewshot_delimiter="\\n\\n"``.
"""

from __future__ import annotations

from collections.abc import Sequence

TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"


def text_prompt(
    exemplars: Sequence[tuple[str, str]],
    query: str,
    description: str = "",
    target_delimiter: str = TARGET_DELIMITER,
    fewshot_delimiter: str = FEWSHOT_DELIMITER,
) -> str:
    """``exemplars`` are (rendered question, answer) pairs; ``query`` is the rendered
    test question."""
    blocks = [description]
    for question, answer in exemplars:
        blocks.append(f"{question}{target_delimiter}{answer}{fewshot_delimiter}")
    blocks.append(query)
    return "".join(blocks)
