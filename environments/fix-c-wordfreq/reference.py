"""What wordfreq should print: reference.py N < input (make_cases.py uses it for the expected outputs)."""

import re
import sys
from collections import Counter

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
words = re.findall(rb"[A-Za-z]+", sys.stdin.buffer.read())
counts = Counter(w.lower().decode() for w in words)
for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
    print(count, word)
