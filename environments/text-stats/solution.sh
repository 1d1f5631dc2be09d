#!/bin/bash
set -euo pipefail
cat > textstats.py <<'PY'
"""Text statistics for the editor dashboard."""

import re
from collections import Counter

_APOSTROPHES = "'\u2019"
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)]*(?=\s|$)")


def words(text):
    out, cur = [], []
    for i, ch in enumerate(text):
        if ch.isalnum():
            cur.append(ch)
        elif (ch in _APOSTROPHES and cur and cur[-1] not in _APOSTROPHES
              and i + 1 < len(text) and text[i + 1].isalnum()):
            cur.append(ch)
        else:
            if cur:
                out.append("".join(cur).lower())
            cur = []
    if cur:
        out.append("".join(cur).lower())
    return out


def sentences(text):
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append(text[start:m.end()])
        start = m.end()
    out.append(text[start:])
    cleaned = (" ".join(s.split()) for s in out)
    return [s for s in cleaned if s]


def top_words(text, n, stopwords=()):
    stop = {w.lower() for w in stopwords}
    counts = Counter(w for w in words(text) if w not in stop)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def average_sentence_length(text):
    sents = sentences(text)
    if not sents:
        return 0.0
    return round(sum(len(words(s)) for s in sents) / len(sents), 2)
PY
