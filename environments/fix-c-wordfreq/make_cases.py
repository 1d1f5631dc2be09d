"""Regenerates tests/cases/*: input, args and expected output (deterministic).
Not part of the workspace."""

import random
import subprocess
from pathlib import Path

cases = Path("tests/cases")
for old in cases.glob("*"):
    old.unlink()
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
for name, (args, data) in inputs.items():
    (cases / f"{name}.in").write_bytes(data)
    (cases / f"{name}.args").write_text(" ".join(args) + "\n")
    out = subprocess.run(
        ["python3", "tests/reference.py", *args], input=data, capture_output=True, check=True
    ).stdout
    (cases / f"{name}.out").write_bytes(out)
    print(name, len(data), "bytes in,", out.count(b"\n"), "lines out")
