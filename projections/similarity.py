"""Seed 002's similarity of page states: TF-IDF cosine over word and character n-grams.

Trayn retrieves a graded step by how alike the agent's state is to the one the step was
taken in; the document gives an embedding (`internalStateEmbedding`) but no model, so the
default here is a deterministic text similarity that needs no service and no package:

- A side is a few short texts: a page's elements (`role name` each) or an intent (the task
  and the step's reasoning). Its terms are the lower-cased words (`[a-z0-9]+`, one-character
  words and `STOP_WORDS` dropped) and the character 3-grams of each word padded with a space
  (` de`, `del`, ..., `te `), so `Delete`/`Deleted` and `Cart`/`Carts` still share terms.
- Each term is weighted by 1 + log(its count) (sublinear, so forty links do not make two
  pages alike) times a smooth IDF over the side's own texts, log((1 + n) / (1 + df)) + 1:
  a word most elements of a page have (their roles, `button`, `link`) weighs less than a
  name only one element has. A side's vector depends on that side
  only, so it is computed once per page and a pair costs one dot product.
- Words and 3-grams are two blocks, each normalised to length 1; the similarity is the mean
  of the two cosines, in [0, 1].

A vector is a pure function of its texts, so retrieval is the same in every process, at
every seq and in every replay.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from memtape.projections.text import WORD_RE

#: English function words that say nothing about a page or a task ("the", "to", "my"...)
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "then",
        "this",
        "to",
        "up",
        "was",
        "we",
        "with",
        "you",
        "your",
    ]
)
#: the key prefix that tells a character 3-gram from a word in one vector
GRAM = "\x00"

Vector = dict[str, float]


@lru_cache(maxsize=65_536)
def terms(text: str) -> dict[str, int]:
    """The word and character 3-gram counts of one short text (see the module docstring)."""
    out: dict[str, int] = {}
    for word in WORD_RE.findall(text.lower()):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        out[word] = out.get(word, 0) + 1
        padded = f" {word} "
        for i in range(len(padded) - 2):
            gram = GRAM + padded[i : i + 3]
            out[gram] = out.get(gram, 0) + 1
    return out


@lru_cache(maxsize=16_384)
def vector(texts: tuple[str, ...]) -> Vector:
    """The TF-IDF vector of one side, its word block and its 3-gram block each of length 1."""
    tf: dict[str, int] = {}
    df: dict[str, int] = {}
    for text in texts:
        for term, count in terms(text).items():
            tf[term] = tf.get(term, 0) + count
            df[term] = df.get(term, 0) + 1
    base = math.log(1 + len(texts)) + 1
    weights = {t: (1 + math.log(c)) * (base - math.log(1 + df[t])) for t, c in tf.items()}
    norms = {False: 0.0, True: 0.0}
    for t, w in weights.items():
        norms[t.startswith(GRAM)] += w * w
    word_norm, gram_norm = math.sqrt(norms[False]) or 1.0, math.sqrt(norms[True]) or 1.0
    return {t: w / (gram_norm if t.startswith(GRAM) else word_norm) for t, w in weights.items()}


def cosine(a: Vector, b: Vector) -> float:
    """The mean of the word and the 3-gram cosines of two vectors, in [0, 1]."""
    if len(a) > len(b):
        a, b = b, a
    # in the smaller vector's own order (its texts' order): the same float sum in every process
    dot = sum(w * b.get(t, 0.0) for t, w in a.items())
    return min(max(dot / 2, 0.0), 1.0)


@lru_cache(maxsize=16_384)
def page_vector(elements: tuple[str, ...]) -> Vector:
    """A page's vector: its element identities (`role:name`) as texts `role name`."""
    return vector(tuple(e.replace(":", " ", 1) for e in elements))


def page_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """How alike two pages are, by their elements' roles and names."""
    return cosine(page_vector(tuple(a)), page_vector(tuple(b)))


def text_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """How alike two intents are, each given as its texts (a task, a step's reasoning)."""
    return cosine(vector(tuple(t for t in a if t)), vector(tuple(t for t in b if t)))


def embedding_similarity(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The cosine of two embeddings, clipped to [0, 1]; None when they cannot be compared (either
    is empty or all zeros, or their lengths differ). Each is scaled to length 1 first, so no
    storable value overflows."""
    if not a or len(a) != len(b):
        return None
    na, nb = math.hypot(*a), math.hypot(*b)
    if not (0 < na < math.inf and 0 < nb < math.inf):
        return None
    return min(max(sum((x / na) * (y / nb) for x, y in zip(a, b)), 0.0), 1.0)
