"""Text helpers of `redaction`: guard words, found spans, compatibility forms.

The guard-word search, the replacement of found spans, and the compatibility forms of
names and text (fullwidth or mathematical letters read as plain ones).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = ["alternation", "fold", "name_form", "replace_spans"]


_LETTER_PERCENT = dict(
    zip(
        "etaoinshrdlcumwfgypbvkjxqz",
        (12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0,
         2.0, 1.9, 1.5, 1.0, 0.8, 0.15, 0.15, 0.1, 0.07),
        strict=True,
    )
)  # fmt: skip
"""How often each letter occurs in English text, in percent (`alternation` anchors)."""

_DIGIT_OR_DASH_PERCENT = 1.0
"""Digits and `-` are common in records (ids, numbers, dates): a letter rarer than this
is the better anchor."""

_OTHER_PERCENT = 0.5
"""Other punctuation (`_`, `:`...): rare in prose, where most characters searched are."""


def _rarity(char: str) -> float:
    if char in _LETTER_PERCENT:
        return _LETTER_PERCENT[char]
    if char.isdigit() or char == "-":
        return _DIGIT_OR_DASH_PERCENT
    return 20.0 if char.isspace() else _OTHER_PERCENT


def alternation(words: Iterable[str]) -> str:
    """A regex matching wherever one of `words` occurs, each word found from its rarest character.

    `re` tries a match only where the text has a character that can begin one: for
    `token|key|secret|...` that is most letters of ordinary text. Here each word begins
    at its rarest character (by English letter frequency), the characters before it
    checked by a lookbehind: `k(?:ey|(?<=tok)en)|c(?<=sec)ret|...`. The search then stops
    at few positions (about 2.5 times faster on records and prose). It finds a match in
    a text exactly when `word1|word2|...` does, but the match starts at the anchor, not
    at the word: use it to ask whether a word occurs, not for the spans.
    """
    by_anchor: dict[str, list[str]] = {}
    for word in sorted(set(words)):
        if not word:
            return ""  # the empty word occurs everywhere
        at = min(range(len(word)), key=lambda i: (_rarity(word[i]), i))
        before, anchor, after = word[:at], word[at], word[at + 1 :]
        behind = f"(?<={re.escape(before + anchor)})" if before else ""
        by_anchor.setdefault(anchor, []).append(behind + re.escape(after))
    return "|".join(
        re.escape(anchor) + (rests[0] if len(rests) == 1 else f"(?:{'|'.join(rests)})")
        for anchor, rests in by_anchor.items()
    )


def replace_spans(text: str, spans: list[tuple[int, int]], replacement: str) -> str:
    """`text` with each of `spans` (start, end) replaced; overlapping spans are one.

    Spans that only touch stay two replacements, as two secrets side by side.
    """
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    done = 0  # text[:done] is in `parts`
    start, end = spans[0]
    for next_start, next_end in spans[1:]:
        if next_start < end:  # overlapping finds are one secret
            end = max(end, next_end)
            continue
        parts += (text[done:start], replacement)
        done, (start, end) = end, (next_start, next_end)
    parts += (text[done:start], replacement, text[end:])
    return "".join(parts)


def name_form(name: str) -> str:
    """`name` in Unicode's compatibility form (NFKC) when it is not ASCII.

    Field names are matched in this form, so a secret name spelled in fullwidth letters
    (U+FF53 for `s`...) or other compatibility letters is still one. Letters of other
    scripts that only look alike (the Cyrillic dze, U+0455) keep their identity, as NFKC
    keeps them.
    """
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


_FOLD_BLOCKS = (
    (0x00A0, 0x0100), (0x2000, 0x2C00), (0x3000, 0x3400), (0xFE00, 0xFFF0),
    (0x1D400, 0x1D800), (0x1F100, 0x1F200),
)  # fmt: skip
"""Where the compatibility letters, digits and punctuation are: Latin-1's, letterlike,
superscripts, circled, CJK symbols, fullwidth forms, mathematical alphanumerics."""

_fold_table: dict[int, str] | None = None


def fold(text: str) -> str:
    """`text` with each compatibility character that NFKC makes one other character so made.

    A fullwidth `s` (U+FF53) or a mathematical bold `s` (U+1D42C) becomes `s`, a
    fullwidth colon `:`. Character for character, so the spans found in the folded text
    are the text's own. Returns `text` itself when nothing changes. The table is built on
    the first call (about 1,900 characters, under 2 ms).
    """
    global _fold_table
    table = _fold_table
    if table is None:  # built whole before it is shared: no thread sees half of it
        table = {}
        for low, high in _FOLD_BLOCKS:
            for point in range(low, high):
                form = unicodedata.normalize("NFKC", chr(point))
                if len(form) == 1 and form != chr(point):
                    table[point] = form
        _fold_table = table
    folded = text.translate(table)
    return text if folded == text else folded
