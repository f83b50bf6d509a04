"""Text keys for dedup and decontamination: exact and normalised problem text, word n-gram overlap."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize_text(text: str) -> str:
    """Case-, width-, punctuation- and whitespace-insensitive form: ``"What is  $2+2$?"`` → ``"what is 2 2"``."""
    text = unicodedata.normalize("NFKC", text).lower()
    return _NON_WORD.sub(" ", text).strip()


def exact_key(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8")).hexdigest()


def normalized_key(text: str) -> str:
    return hashlib.sha1(normalize_text(text).encode("utf-8")).hexdigest()


@dataclass
class Duplicate:
    item_index: int  # position in the input list
    first_index: int  # the kept item it duplicates
    how: str  # "exact" | "normalized"


def dedup(items: list[T], text_of: Callable[[T], str]) -> tuple[list[T], list[Duplicate]]:
    """Keep the first of every group of items with the same exact text, then the same normalised text."""
    kept_idx: list[int] = []
    dups: list[Duplicate] = []
    seen_exact: dict[str, int] = {}
    seen_norm: dict[str, int] = {}
    for i, item in enumerate(items):
        text = text_of(item)
        ek, nk = exact_key(text), normalized_key(text)
        if ek in seen_exact:
            dups.append(Duplicate(i, seen_exact[ek], "exact"))
            continue
        if nk in seen_norm:
            dups.append(Duplicate(i, seen_norm[nk], "normalized"))
            continue
        seen_exact[ek], seen_norm[nk] = i, i
        kept_idx.append(i)
    return [items[i] for i in kept_idx], dups


def word_ngrams(text: str, n: int) -> set[str]:
    """Word n-grams of the normalised text; a text shorter than ``n`` words is one gram (the whole text)."""
    words = normalize_text(text).split()
    if not words:
        return set()
    if len(words) < n:
        return {" ".join(words)}
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass
class Contamination:
    eval_id: str
    score: float  # max of (shared grams / train grams, shared grams / eval grams)
    shared: int


class Decontaminator:
    """Flags training texts that overlap an eval text by word n-grams.

    The score is the larger of the two overlap fractions, so both a training problem that copies an eval problem and
    one that embeds it in a longer text are caught. A text is contaminated when ``score >= threshold``.
    """

    def __init__(self, eval_texts: Iterable[tuple[str, str]], *, n: int = 13, threshold: float = 0.5) -> None:
        if n < 1 or not 0.0 < threshold <= 1.0:
            raise ValueError(f"need n >= 1 and 0 < threshold <= 1, got n={n}, threshold={threshold}")
        self.n, self.threshold = n, threshold
        self.index: dict[str, list[str]] = defaultdict(list)
        self.sizes: dict[str, int] = {}
        for eval_id, text in eval_texts:
            grams = word_ngrams(text, n)
            if eval_id in self.sizes:
                raise ValueError(f"duplicate eval id {eval_id!r}")
            self.sizes[eval_id] = len(grams)
            for g in grams:
                self.index[g].append(eval_id)

    def __len__(self) -> int:
        return len(self.sizes)

    def check(self, text: str) -> Contamination | None:
        grams = word_ngrams(text, self.n)
        if not grams:
            return None
        hits: dict[str, int] = defaultdict(int)
        for g in grams:
            for eval_id in self.index.get(g, ()):
                hits[eval_id] += 1
        best: Contamination | None = None
        for eval_id, shared in hits.items():
            score = max(shared / len(grams), shared / max(1, self.sizes[eval_id]))
            if best is None or score > best.score:
                best = Contamination(eval_id, score, shared)
        return best if best is not None and best.score >= self.threshold else None
