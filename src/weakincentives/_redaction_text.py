"""Text helpers of `redaction`: the guard-word search and the replacement of found spans."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["alternation", "replace_spans"]


def alternation(words: Iterable[str]) -> str:
    """A regex matching wherever one of `words` occurs, as a trie: `s(?:k-|ecret)|...`.

    It matches where `word1|word2|...` does; branching on each next character, the
    search tries far fewer alternatives per position of the text (about a third less
    time on a record's strings).
    """
    by_first: dict[str, list[str]] = {}
    for word in sorted(set(words)):
        by_first.setdefault(word[:1], []).append(word[1:])
    branches = []
    for first, rests in by_first.items():
        if not first or "" in rests:  # a word ends here: longer ones add no match
            branches.append(re.escape(first))
        elif len(rests) == 1:
            branches.append(re.escape(first + rests[0]))
        else:
            branches.append(f"{re.escape(first)}(?:{alternation(rests)})")
    return "|".join(branches)


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
