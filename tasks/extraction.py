"""Answer extraction and exact-match scoring with lm-eval 0.4.13's semantics.

Three pieces, each a frozen configuration with one method, each reproducing the
behaviour of the lm-eval component named in its docstring (checked against lm-eval's
own code, response by response, in ``tests/tasks/test_parity_scoring.py``):

- ``RegexExtractor``        = lm-eval filter ``regex`` (+ ``take_first``)
- ``MultiChoiceExtractor``  = lm-eval filter ``multi_choice_regex`` (+ ``take_first``)
- ``ExactMatch``            = lm-eval metric ``exact_match`` (numpy string semantics)

Plus ``answer_section``, the reasoning-tolerant pre-step of the chat variants.
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

INVALID = "[invalid]"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def _pick(matches: list, group_select: int):
    """The ``group_select``-th findall result; for a multi-group pattern, its first
    non-empty group (None when every group is empty)."""
    chosen = matches[group_select]
    if isinstance(chosen, tuple):
        non_empty = [g for g in chosen if g]
        return non_empty[0] if non_empty else None
    return chosen


@dataclass(frozen=True)
class RegexExtractor:
    """lm-eval's ``regex`` filter: ``findall``, take match ``group_select`` (0 = first,
    -1 = last), strip it; no match (or all groups empty) gives the fallback."""

    name: str
    pattern: str
    group_select: int = 0
    fallback: str = INVALID

    def extract(self, text: str, choices: Sequence[str] = ()) -> str:
        matches = re.findall(self.pattern, text if isinstance(text, str) else "")
        if not matches:
            return self.fallback
        chosen = _pick(matches, self.group_select)
        return self.fallback if chosen is None else chosen.strip()


@lru_cache(maxsize=1)
def _unicode_punctuation_deleter() -> dict[int, None]:
    """A ``str.translate`` table deleting every code point below ``sys.maxunicode``
    whose Unicode category starts with "P" (lm-eval's multi-choice normalisation)."""
    return {cp: None for cp in range(sys.maxunicode)
            if unicodedata.category(chr(cp))[0] == "P"}


@dataclass(frozen=True)
class MultiChoiceExtractor:
    """lm-eval's ``multi_choice_regex`` filter. In order, the first that yields a
    non-empty answer wins:

    1. ``pattern`` (e.g. ``(\\([A-Z]\\))``) on the raw text, match ``group_select``;
    2. the choice texts themselves, searched in the normalised text (lower-cased and
       Unicode punctuation removed when configured), longest choice first; the match
       becomes the letter of the (last) choice with that normalised text;
    3. ``:`` + optional whitespace + a bare letter A-D on the raw text;
    4. the fallback ``[invalid]``.
    """

    name: str
    pattern: str
    group_select: int = 0
    ignore_case: bool = False
    ignore_punctuation: bool = False
    fallback: str = INVALID

    def _normalise(self, text: str) -> str:
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(_unicode_punctuation_deleter())
        return text

    def _search(self, pattern: str, text: str, letter_of: dict[str, str]) -> str:
        matches = re.findall(pattern, text)
        if not matches:
            return ""
        chosen = _pick(matches, self.group_select)
        if chosen is None:
            return ""
        chosen = chosen.strip()
        return letter_of.get(chosen, chosen) if chosen else chosen

    def extract(self, text: str, choices: Sequence[str] = ()) -> str:
        text = text if isinstance(text, str) else ""
        letters = [chr(ord("A") + k) for k in range(len(choices))]
        letter_of_text: dict[str, str] = {}
        for letter, choice in zip(letters, choices, strict=True):
            letter_of_text[self._normalise(choice.strip())] = f"({letter})"
        # Longest first, so a choice that is a prefix of another cannot shadow it.
        by_length = sorted((re.escape(self._normalise(c.strip())) for c in choices),
                           key=len, reverse=True)
        answer = self._search(self.pattern, text, {})
        if not answer:
            answer = self._search("|".join(by_length), self._normalise(text), letter_of_text)
        if not answer:
            bare = {letter: f"({letter})" for letter in letters}
            answer = self._search(rf":[\s]*({'|'.join(letters)})", text, bare)
        return answer if answer else self.fallback


_ASCII_PUNCTUATION_DELETER = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class ExactMatch:
    """lm-eval's ``exact_match`` metric (``exact_match_hf_evaluate``) for one pair:
    delete each ``regexes_to_ignore`` pattern in order from both strings, lower-case,
    delete ASCII punctuation, compare. The strings pass through 1-element numpy unicode
    arrays there, which drop trailing NULs and keep their width when lower-casing adds
    code points (e.g. "İ"); both quirks are reproduced here."""

    ignore_case: bool = False
    ignore_punctuation: bool = False
    regexes_to_ignore: tuple[str, ...] = ()

    def _normalise(self, text: str) -> str:
        width = len(text)  # the numpy array's width: set by the last string stored
        for k, pattern in enumerate(self.regexes_to_ignore):
            text = re.sub(pattern, "", text if k == 0 else text.rstrip("\x00"))
            width = len(text)
        text = text.rstrip("\x00")
        if self.ignore_case:
            text = text.lower()[:width].rstrip("\x00")
        if self.ignore_punctuation:
            text = text.translate(_ASCII_PUNCTUATION_DELETER)
        return text

    def __call__(self, prediction: str, reference: str) -> float:
        return 1.0 if self._normalise(prediction) == self._normalise(reference) else 0.0


def truncate_at_stops(text: str, until: Sequence[str]) -> str:
    """Cut the text at each stop string in turn, as lm-eval's model wrappers do; an
    engine that already stopped there leaves nothing to cut."""
    for stop in until:
        if stop:
            text = text.split(stop)[0]
    return text


def answer_section(text: str) -> str | None:
    """The part of a chat/reasoning model's reply that holds its answer.

    - A ``<think>`` block that never closed (no ``</think>`` anywhere): None. The
      reasoning was cut off (usually at ``max_gen_toks``), the reply holds no answer, and
      every filter reports ``[invalid]``. (lm-eval would mine numbers out of the
      unfinished reasoning instead; this is the one deliberate difference.)
    - Otherwise exactly lm-eval's ``think_end_token="</think>"`` handling: the text
      after the LAST ``</think>`` (all of it when there is none), left-stripped.
    """
    if THINK_OPEN in text and THINK_CLOSE not in text:
        return None
    return text.split(THINK_CLOSE)[-1].lstrip()
