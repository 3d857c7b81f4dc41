"""The fixed few-shot exemplars of each testbed task: two worked examples, written by
hand in exactly the format of the generated items.

Every item of a task starts with the same prefix built from these, so a prefix cache
hits on every request after the first and bounded encoder replay has a long shared
history to work on. Their keys are reserved: no item defines them again.
"""

from __future__ import annotations

from tasks.prompting import text_prompt
from tasks.testbed.records import keys_in

LOOKUP_EXEMPLARS = (
    ("Records:\nP4T=17\nD8M=63\nW2A=5\nWhat is D8M?", "D8M=63. #### 63"),
    ("Records:\nH1C=40\nZ6R=8\nB3N=91\nL7X=26\nWhat is H1C?", "H1C=40. #### 40"),
)
ARITH_EXEMPLARS = (
    ("Records:\nQ5E=31\nJ9K=4\nCompute 23+9-5.", "23+9=32. 32-5=27. #### 27"),
    ("Records:\nU2G=77\nCompute 41-16+8+30.", "41-16=25. 25+8=33. 33+30=63. #### 63"),
)
LOOKUP_ARITH_EXEMPLARS = (
    ("Records:\nV3S=45\nK1D=9\nCompute V3S-K1D.", "V3S=45. K1D=9. 45-9=36. #### 36"),
    ("Records:\nR8B=27\nM2W=58\nE4H=3\nCompute R8B+M2W.", "R8B=27. M2W=58. 27+58=85. #### 85"),
)

QUERY_PREFIX = "Question: "
QUERY_SUFFIX = "\nAnswer:"

RESERVED_KEYS = frozenset().union(
    *(keys_in(q) for ex in (LOOKUP_EXEMPLARS, ARITH_EXEMPLARS, LOOKUP_ARITH_EXEMPLARS)
      for q, _ in ex))


def query(question: str) -> str:
    """The rendered question, GSM8K's ``gsm8k`` template: ``Question: ...\\nAnswer:``."""
    return f"{QUERY_PREFIX}{question}{QUERY_SUFFIX}"


def fewshot_prefix(exemplars: tuple[tuple[str, str], ...]) -> str:
    """Everything before an item's own question: lm-eval's layout (question, " ",
    answer, blank line) for each exemplar."""
    return text_prompt(tuple((query(q), a) for q, a in exemplars), "")
