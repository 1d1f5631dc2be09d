"""Regenerates tests/cases.json, the outputs check's cases: args, stdin and the expected
output of reference.py, then the usage errors (deterministic). Run from the task folder.
Not part of the workspace; the cases file never enters a sandbox."""

import json
import random
import subprocess
from pathlib import Path

rng = random.Random(5)

text1 = (
    b"It was the best of times, it was the worst of times, it was the age of wisdom,\n"
    b"it was the age of foolishness, it was the epoch of belief, IT WAS the epoch of\n"
    b"incredulity. Best? Worst! Age... Wisdom; foolishness: Belief (incredulity) zebra"
)
vocab = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
]
vocab += [
    "w{}".format(
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
    )
    for _ in range(180)
]
big = []
for _ in range(4000):
    w = rng.choice(vocab[: rng.choice([20, 60, 200])])
    big.append(w.upper() if rng.random() < 0.1 else w.capitalize() if rng.random() < 0.2 else w)
    big.append(rng.choice([" ", " ", "\n", ", ", ". ", " -- ", "\t"]))
long_word = "".join(rng.choice("abcdefghij") for _ in range(300))

inputs = {
    "01-default": ([], text1),
    "02-top3": (["3"], text1),
    "03-more-than-distinct": (["100"], b"b a c b a b\nC"),
    "04-empty": ([], b""),
    "05-punctuation": (["20"], b"don't stop -- e-mail me at abc123def@x.org; DON'T!\nstop"),
    "06-crlf-and-bytes": (
        ["5"],
        "Caf\u00e9 au lait\r\ncaf\u00e9 NOIR\r\nnoir caf\u00e9\r\n".encode(),
    ),
    "07-long-word": (["4"], (long_word + " x " + long_word.upper() + " y\n" + long_word).encode()),
    "08-many-words": (["15"], "".join(big).encode()),
    "09-ties": (["6"], b"pear fig kiwi apple fig pear date kiwi apple banana cherry date"),
}
cases = []
for name, (args, data) in inputs.items():
    out = subprocess.run(
        ["python3", "reference.py", *args], input=data, capture_output=True, check=True
    ).stdout
    cases.append({"name": name, "args": args, "stdin": data.decode(), "expect": out.decode()})
    print(name, len(data), "bytes in,", out.count(b"\n"), "lines out")
for bad in ["0", "-3", "abc", "5x", ""]:
    cases.append(
        {
            "name": f"usage: N={bad!r}",
            "args": [bad],
            "stdin": "",
            "expect": "",
            "exit_code": 2,
            "stderr_contains": "usage: wordfreq [N]",
        }
    )
cases.append({"name": "usage: two arguments", "args": ["1", "2"], "stdin": "", "exit_code": 2})
text = "[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n"
Path("tests/cases.json").write_text(text)
