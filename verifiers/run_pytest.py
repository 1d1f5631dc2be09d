"""Run the hidden tests: run_pytest.py WORKDIR JUNIT_XML -- ARGS...

Started as ``python3 -I`` with the tests folder as the working directory, so neither the
environment nor the agent's folder can put a module ahead of the standard library or
pytest; the workdir is appended last, for the tests to import the agent's code.
"""

import os
import sys


def main():
    workdir, junit = sys.argv[1], sys.argv[2]
    args = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else ["."]
    tests = os.getcwd()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.append(workdir)
    import pytest

    argv = [
        "-q",
        "-c",
        os.path.join(here, "pytest.ini"),
        "--rootdir",
        tests,
        "--confcutdir",
        tests,
        "--junitxml",
        junit,
        "-o",
        "junit_family=xunit1",
    ] + [a if a.startswith("-") else os.path.join(tests, a) for a in args]
    os.chdir(workdir)  # tests may open the agent's files by relative path
    return pytest.main(argv)


if __name__ == "__main__":
    sys.exit(main())
