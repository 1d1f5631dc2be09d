"""Run the hidden tests: run_pytest.py UID:GID WORKDIR -- ARGS...
Run a repo's own tests:  run_pytest.py --repo UID:GID WORKDIR -- ARGS...

Started as root with ``python3 -I -S`` in the tests folder (with ``--repo``: in the workdir,
by the interpreter that has the repo's dependencies, never one inside the workdir): no
site-packages, no ``.pth`` file and no ``sitecustomize`` is read by this root process. The
tests import the agent's code, so pytest runs in a child that drops to the agent's user
first (and only then reads site-packages); the agent's code shares that child's process,
so the verdict is kept away from it as far as a process boundary allows:

- the child reports to this parent over a pipe, once, at the end of the session, with a
  nonce it read (and closed the pipe of) before any of the agent's code was imported; this
  parent accepts exactly one report carrying the nonce, so a report forged at import or at
  exit, a second one, or none (``os._exit``) is no verdict, and the checks score 0;
- the child's stdout and stderr go to a pipe this parent drains for the log, so nothing the
  agent's code prints reaches the host; the result is this parent's last stdout line.

What the agent's code can still do in its own process (read the tests, patch pytest, find
the nonce in memory) is listed in docs/verification.md.

pytest runs in isolated mode with our own ``pytest.ini`` forced (``-c``), conftest lookup
confined to the tests, and the workdir appended last to ``sys.path``. With ``--repo`` the
tests are the repo's (a SWE-bench instance's): pytest reads the repo's own configuration
and conftests, from the workdir, which the verifier has restored first (see
docs/swebench.md). ARGS go to pytest as
given, with the tests folder as rootdir and invocation directory (so paths and node ids in
them, ``--ignore`` values too, are relative to it); once pytest is configured the working
directory is the workdir, where the tests run.

Each test's outcome is ``passed``, ``failed``, ``error``, ``xfailed``, ``skipped`` (by a
``skip``/``skipif`` marker of the tests, evaluated before it ran: nothing of the agent's ran
for it) or ``skipped-run`` (a skip raised while running or collecting: ``pytest.skip()``,
``importorskip``, ``unittest.SkipTest``, which the agent's code can raise too).
"""

import json
import os
import select
import sys
import tempfile
import time

MAX_REPORT = 8 << 20
LOG_TAIL = 4000
LINGER_S = 0.5  # after the child exits: a grandchild holding our pipes cannot make us wait


def skip_reason(report):
    """The reason a skip report gives (its longrepr is (path, line, reason) for skips)."""
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(getattr(report, "wasxfail", "") or longrepr or "")
    return text.replace("Skipped: ", "", 1)[:200]


class Reporter(object):
    """The child's pytest plugin: per-test outcomes, written once at the session's end."""

    def __init__(self, report_fd, nonce, tests, workdir, repo):
        self.report_fd = report_fd
        self.tests = tests
        self.workdir = workdir
        self.repo = repo
        self.rootdir = tests
        self.nonce = nonce
        self.outcomes = {}
        self.reasons = {}
        self.marked = set()  # tests a skip marker of the hidden tests skipped
        self.evaluate_skip_marks = None

    def pytest_configure(self, config):
        self.rootdir = str(config.rootpath)
        try:  # taken now: a later patch of the module by the agent's code is not ours
            from _pytest.skipping import evaluate_skip_marks

            self.evaluate_skip_marks = evaluate_skip_marks
        except ImportError:  # another pytest: every skip then counts as skipped-run
            pass
        # args were read relative to the tests (the invocation directory); --ignore values
        # are read at collection from the working directory: make them absolute first
        for name in ("ignore", "ignore_glob"):
            values = getattr(config.option, name, None)
            if values:
                setattr(config.option, name, [os.path.join(self.tests, v) for v in values])
        os.chdir(self.workdir)  # tests may open the agent's files by relative path

    def runtest_setup(self, item):
        """A hookwrapper around pytest_runtest_setup: whether a skip marker skips it."""
        if self.evaluate_skip_marks is not None:
            try:
                if self.evaluate_skip_marks(item) is not None:
                    self.marked.add(item.nodeid)
            except Exception:  # a broken condition: pytest reports it as the test's error
                pass
        yield

    def key(self, nodeid):
        """A test's id. With ``--repo``, its file's path is made relative to the workdir,
        whatever rootdir the repo's configuration chose: an ini file planted deeper down
        moves the rootdir, and with it every node id, onto tests of its own."""
        if not self.repo or not nodeid:
            return nodeid
        path, sep, rest = nodeid.partition("::")
        real = os.path.relpath(os.path.join(self.rootdir, path), self.workdir)
        return real + sep + rest

    def pytest_collectreport(self, report):
        where = self.key(report.nodeid) or "collection"
        if report.failed:
            self.outcomes[where] = "error"
        elif report.skipped:  # a module that skipped itself (the agent's code can do that)
            self.outcomes[where] = "skipped-run"
            self.reasons[where] = skip_reason(report)

    def pytest_runtest_logreport(self, report):
        nodeid = self.key(report.nodeid)
        before = self.outcomes.get(nodeid)
        if report.failed:
            now = "failed" if report.when == "call" else "error"
        elif report.skipped:
            if hasattr(report, "wasxfail"):
                now = "xfailed"
            elif report.when == "setup" and report.nodeid in self.marked:
                now = "skipped"
            else:
                now = "skipped-run"
        elif report.when == "call":
            now = "passed"
        else:
            return
        if before in (None, "passed"):
            self.outcomes[nodeid] = now
            if now in ("skipped", "skipped-run", "xfailed"):
                self.reasons[nodeid] = skip_reason(report)

    def pytest_sessionfinish(self, session, exitstatus):
        found = {"nonce": self.nonce, "outcomes": self.outcomes, "reasons": self.reasons}
        data = json.dumps(found).encode()
        while data:
            data = data[os.write(self.report_fd, data) :]
        os.close(self.report_fd)


def child(user, workdir, args, report_fd, nonce_fd, log_fd, repo):
    # the nonce is read, and its pipe closed, before pytest loads anything: a repo's
    # conftest.py (the agent's code) is imported before any pytest_configure hook runs
    nonce = os.read(nonce_fd, 64).decode()
    os.close(nonce_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    uid, _, gid = user.partition(":")
    os.setgroups([])
    os.setgid(int(gid or uid))
    os.setuid(int(uid))
    os.environ["HOME"] = "/tmp"
    # bytecode is read and written in a folder of our own: a .pyc planted in a __pycache__
    # next to a restored file (a conftest.py, whose size and mtime the agent knows) would be
    # run in its place
    sys.pycache_prefix = tempfile.mkdtemp(prefix="agentenv-pycache-")
    # site-packages, and its .pth files, are read only now, as the agent's user: this root
    # parent was started with -S, since an editable install puts the workdir on sys.path,
    # where the agent can leave a sitecustomize.py
    import site

    site.main()
    tests = os.getcwd()  # pytest's invocation directory: args are relative to the tests
    here = os.path.dirname(os.path.abspath(__file__))
    if repo:  # the repo's own tests, configuration and conftests, rooted where it says
        argv = ["-q", "-p", "no:cacheprovider", *args]
    else:
        sys.path.append(workdir)
        argv = [
            "-q",
            "-c",
            os.path.join(here, "pytest.ini"),
            "--rootdir",
            tests,
            "--confcutdir",
            tests,
            *args,  # as the task gives them: "--deselect", "<nodeid>" and "-k", "expr" too
        ]
    import pytest

    # a wrapper round every other implementation, so it sees the test before a marker
    # skips it (marked on the class's function: a bound method takes no attributes)
    Reporter.pytest_runtest_setup = pytest.hookimpl(hookwrapper=True)(Reporter.runtest_setup)
    reporter = Reporter(report_fd, nonce, tests, workdir, repo)
    return int(pytest.main(argv, plugins=[reporter]))


def parse_args(argv):
    """``[--repo] UID:GID WORKDIR -- ARGS...`` as (repo, user, workdir, pytest's args)."""
    repo = argv[:1] == ["--repo"]
    if repo:
        argv = argv[1:]
    user, workdir = argv[0], argv[1]
    args = argv[argv.index("--") + 1 :] if "--" in argv else ["."]
    return repo, user, workdir, args


def start_child(user, workdir, args, repo, nonce):
    """Fork the pytest child and hand it the nonce; its pid and this parent's ends of the
    report and log pipes (the child never returns from here: it exits)."""
    report_r, report_w = os.pipe()
    nonce_r, nonce_w = os.pipe()
    log_r, log_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (report_r, nonce_w, log_r):
            os.close(fd)
        try:
            code = child(user, workdir, args, report_w, nonce_r, log_w, repo)
        except BaseException as e:  # whatever happened, the child ends here
            os.write(2, ("run_pytest: %s: %s\n" % (type(e).__name__, e)).encode())
            code = 3
        os._exit(code)
    for fd in (report_w, nonce_r, log_w):
        os.close(fd)
    os.write(nonce_w, nonce.encode())
    os.close(nonce_w)
    return pid, report_r, log_r


def drain(pid, report_r, log_r):
    """Read the report and the log's tail until both pipes close (or the child has been gone
    for ``LINGER_S``), then reap it: (report, log, wait status). A report over
    ``MAX_REPORT`` is cut to one that parses as no verdict."""
    report, log, status, exited_at = b"", b"", None, None
    open_fds = {report_r, log_r}
    while open_fds:
        if status is None:
            done, status_now = os.waitpid(pid, os.WNOHANG)
            if done:
                status, exited_at = status_now, time.monotonic()
        if exited_at is not None and time.monotonic() - exited_at > LINGER_S:
            break
        ready, _, _ = select.select(list(open_fds), [], [], 0.05)
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.discard(fd)
            elif fd == report_r:
                report += data
                if len(report) > MAX_REPORT:
                    open_fds.discard(report_r)  # too big: no verdict
                    report = b"!"
            else:
                log = (log + data)[-LOG_TAIL:]
    if status is None:
        _, status = os.waitpid(pid, 0)
    return report, log, status


def verdict(report, nonce):
    """The (outcomes, reasons) of the one report carrying ``nonce``; (None, None) else."""
    outcomes = reasons = None
    try:
        found = json.loads(report.decode())
        if isinstance(found, dict) and found.get("nonce") == nonce:
            outcomes, reasons = found.get("outcomes"), found.get("reasons")
    except (ValueError, RecursionError):
        pass  # none, two, cut, nested past the parser or forged: no verdict
    return outcomes, reasons


def main():
    repo, user, workdir, args = parse_args(sys.argv[1:])
    nonce = os.urandom(16).hex()
    pid, report_r, log_r = start_child(user, workdir, args, repo, nonce)
    report, log, status = drain(pid, report_r, log_r)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    outcomes, reasons = verdict(report, nonce)
    line = {"outcomes": outcomes, "reasons": reasons, "exit": code}
    line["log"] = log.decode("utf-8", "replace")
    sys.stdout.write("\n" + json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
