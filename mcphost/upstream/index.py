"""BM25 ranking over the upstream tools (name, description, parameter names). Pure, no I/O.

Scores are normalised by the best score the query could reach (every query term saturating a document), so
0..1 says how well a tool matches in absolute terms, not only relative to the other hits.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

K1 = 1.2
B = 0.75
# The tool's name says more about what it does than a word deep in its description.
NAME_WEIGHT = 3
PARAM_WEIGHT = 1

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
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
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "with",
    ]
)


def tokenize(text: str) -> list[str]:
    words = _WORD.findall(_CAMEL.sub(" ", text).lower())
    return [_stem(w) for w in words if w not in _STOPWORDS]


def _stem(word: str) -> str:
    # A light plural fold ("tasks" ~ "task", "issues" ~ "issue") without a stemming dependency.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True, slots=True)
class Document:
    key: str  # "server:tool"
    name: str
    description: str
    parameters: Sequence[str]

    def terms(self) -> list[str]:
        terms = tokenize(self.name) * NAME_WEIGHT + tokenize(self.description)
        for param in self.parameters:
            terms += tokenize(param) * PARAM_WEIGHT
        return terms


def parameter_names(input_schema: dict[str, Any] | None) -> list[str]:
    props = (input_schema or {}).get("properties")
    return list(props) if isinstance(props, dict) else []


@dataclass(frozen=True, slots=True)
class Hit:
    key: str
    score: float  # 0..1


class BM25Index:
    def __init__(self, documents: Iterable[Document]) -> None:
        self._docs = list(documents)
        self._tfs: list[Counter[str]] = []
        self._lengths: list[int] = []
        df: Counter[str] = Counter()
        for doc in self._docs:
            tf = Counter(doc.terms())
            self._tfs.append(tf)
            self._lengths.append(sum(tf.values()))
            df.update(tf.keys())
        n = len(self._docs)
        self._avg_len = (sum(self._lengths) / n) if n else 0.0
        # BM25+ style idf that stays positive for terms in most documents.
        self._idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}
        self._n = n

    def __len__(self) -> int:
        return self._n

    def search(self, query: str, limit: int) -> list[Hit]:
        terms = tokenize(query)
        if not terms:
            return [Hit(doc.key, 0.0) for doc in sorted(self._docs, key=lambda d: d.key)][:limit]
        query_tf = Counter(terms)
        # The ceiling: every query term at full saturation. A term no tool mentions counts at the highest idf,
        # so a query that only half matches scores lower than one that matches whole.
        unseen_idf = math.log(1 + (self._n + 0.5) / 0.5)
        ceiling = sum(self._idf.get(t, unseen_idf) * (K1 + 1) * c for t, c in query_tf.items())
        if ceiling <= 0:
            return []
        scored: list[tuple[float, str]] = []
        for doc, tf, length in zip(self._docs, self._tfs, self._lengths, strict=True):
            score = 0.0
            norm = K1 * (1 - B + B * length / self._avg_len) if self._avg_len else K1
            for term, count in query_tf.items():
                f = tf.get(term)
                if f:
                    score += self._idf[term] * (f * (K1 + 1)) / (f + norm) * count
            if score > 0:
                scored.append((score, doc.key))
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [Hit(key, round(min(score / ceiling, 1.0), 4)) for score, key in scored[:limit]]


def closest_names(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """Names that look like a mistyped `name`: whole "server:tool" first, then the tool part alone."""
    pool = sorted(set(candidates))
    found = difflib.get_close_matches(name, pool, n=limit, cutoff=0.8)
    tool_part = name.rsplit(":", 1)[-1]
    by_tool: dict[str, str] = {}
    for candidate in pool:
        by_tool.setdefault(candidate.rsplit(":", 1)[-1], candidate)
    for match in difflib.get_close_matches(tool_part, list(by_tool), n=limit, cutoff=0.75):
        if by_tool[match] not in found:
            found.append(by_tool[match])
    return found[:limit]
