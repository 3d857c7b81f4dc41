"""Generators of adversarial model responses for the scoring-parity tests.

Each generator returns plain strings built from an item's gold answer, a wrong answer
and (for GPQA) the item's choice texts, which stay in memory: tests report mismatches
by (task, item id, response index) only.
"""

from __future__ import annotations

import random


def gsm8k_responses(gold: str, rng: random.Random) -> list[str]:
    """About 70 responses around a GSM8K gold answer (an integer string)."""
    g = gold
    n = int(g.replace(",", ""))
    w = str(n + 1)
    big = f"{n * 1000:,}"
    return [
        "", " ", "\n", "I don't know.", "No number here at all.",
        g, f"{g}.", f"${g}", f"${g}.", f"{g}.00", f"{g}.0", f"{g},", f",{g}", f"-{g}",
        f"#### {g}", f"####{g}", f"#### {g}.", f"#### ${g}", f"#### -{g}", f"#### {w}",
        f"#### {g}\n\nQuestion: what is {w}?", f"#### {g} </s> {w}", f"#### {g}<|im_end|>{w}",
        f"The answer is {g}.", f"The answer is {g}", f"The answer is {g}!", f"The answer is ${g}.",
        f"The answer is {w}. Wait, {g}.", f"The answer is {g}. Wait, {w}.",
        f"the answer is {g}.", f"The answer is: {g}.", f"The answer is {g},000.",
        f"The final answer is {g}", f"The final answer is ${g}.", f"The final answer is {w}",
        f"The final answer is {g}. The final answer is {w}",
        f"The final answer is {w}. The final answer is {g}",
        f"So {w} - 1 = {g}. The answer is {g}.", f"{g} apples and {w} pears",
        f"First {g}, then {w}", f"First {w}, then {g}.", f"{g} + {w} = {n + n + 1}",
        f"Total: {big}", f"#### {big}", f"The answer is {big}.",
        f"{g}%", f"{g} dollars", f"{g}.\n", f"  {g}  ", f"1. {g}", f"{g}..", f"{g}.5",
        f"-{g}.", f"−{g}", f"１２ {g}", f"{g}１", f"İ{g}", f"{g}\x00", f"\x00{g}",
        f"<think>{w}</think>{g}", f"<think>{g}</think>The final answer is {w}",
        f"<think>{w}</think>\n\nThe final answer is {g}.", f"<think>unfinished {g}",
        f"<think>a</think><think>{w}</think> {g}", f"</think>{g}",
        f"Let me think. {w}? No. **Final answer: {g}**", f"\\boxed{{{g}}}",
        f"The answer is \\boxed{{{g}}}.", f"$$ {g} $$", f"{g}\n\nQ: next question {w}",
        "".join(rng.choice("0123456789.,$- ") for _ in range(12)),
        "".join(rng.choice("0123456789.,$- ") for _ in range(6)),
    ]


def gpqa_responses(letter: str, wrong: str, choices: list[str], rng: random.Random) -> list[str]:
    """About 70 responses around a GPQA gold letter, a wrong letter and the choices."""
    gold_text = choices["ABCD".index(letter)]
    wrong_text = choices["ABCD".index(wrong)]
    out = [
        "", " ", "I am not sure.", f"({letter})", f"{letter}", f"{letter}.", f"({letter}).",
        f"({letter.lower()})", f"{letter.lower()}.", f"[{letter}]", f"**({letter})**",
        f"The answer is ({letter}).", f"The answer is ({letter})", f"The answer is {letter}.",
        f"The answer is {letter}", f"The answer is ({wrong}).", f"the answer is ({letter}).",
        f"The answer is ({letter}).\nMore text", f"The answer is **({letter})**.",
        f"The answer is ({letter}). The answer is ({wrong}).",
        f"The answer is ({wrong}). Actually ({letter})",
        f"Answer: {letter}", f"Answer:{letter}", f"answer: {letter}", f"Answer: ({letter})",
        f"Answer: {wrong}", f"Final: {letter}.", f"I pick {letter}.",
        f"({wrong}) is tempting but ({letter}) is right", f"({letter}) not ({wrong})",
        f"Between ({letter}) and ({wrong}): ({wrong})",
        gold_text, wrong_text, gold_text.lower(), gold_text.upper(), f"{gold_text}.",
        f"The answer is {gold_text}.", f"It must be {gold_text}!", f"\"{wrong_text}\"",
        f"{gold_text} or {wrong_text}", f"{wrong_text} or {gold_text}",
        f"Choices considered. {gold_text}", f"({letter}) {gold_text}",
        f"（{letter}）", f"({letter}）", f"The answer is （{letter}）.", f"Answer：{letter}",
        f"<think>({wrong})</think>The answer is ({letter}).",
        f"<think>({letter})</think>The answer is ({wrong}).",
        f"<think>long thought ({letter})", f"<think>x</think>\n\n({letter})",
        f"<think>x</think>Answer: {letter}", f"<think>x</think>{gold_text}",
        f"The answer is ({letter}).</s>The answer is ({wrong}).",
        f"({letter})\nQuestion: next ({wrong})", f"({letter})<|im_end|>({wrong})",
        f"Let's think step by step: first ({wrong}), then ({letter}).",
        f"(E) (F) {letter}", "(Z)", "(A)(B)(C)(D)", ":A", ": b", ":\n\tC",
        "The answer is ", "The answer is (", "The answer is .", "The answer is  ",
    ]
    out.append("".join(rng.choice("ABCD() .:\n") for _ in range(10)))
    out.append("".join(rng.choice("abcd()[]:; ") for _ in range(8)))
    return out
