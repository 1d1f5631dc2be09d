"""Run the hidden tests: run_pytest.py UID:GID WORKDIR -- ARGS...
Run them apart from the agent's code: run_pytest.py --process UID:GID WORKDIR -- ARGS...
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
the nonce in memory) is listed in docs/verification.md. What of it can be seen is flagged:
the result line's ``suspicious`` lists what does not add up (a report whose exit status is
not the process's, failures pytest counted or printed that the report lacks, a report with
no summary after it, pytest's internals or our reporter replaced, a plugin registered while
the tests ran). The agent's code can hide each of these from a process it runs in; they
catch what does not take the trouble.

With ``--process`` the child stays root and never imports the agent's code (the workdir is
not on ``sys.path``, the working directory stays the tests): the tests reach it through the
``agent`` fixture of ``agent_proxy.py``, which calls it in processes of the agent's user
and gives back plain values. Nothing in this process is the agent's, so its report is the
verdict.

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
import re
import select
import sys
import tempfile
import time

MAX_REPORT = 8 << 20
LOG_TAIL = 4000
LINGER_S = 0.5  # after the child exits: a grandchild holding our pipes cannot make us wait
# Taken when this file is loaded, before anything of the agent's: the child reports and
# ends with these, whatever its code does to the os and json modules later.
_write, _close, _exit, _dumps = os.write, os.close, os._exit, json.dumps
# What pytest decides an outcome with, and what reports it: each is compared at the end
# of the session with what it was before the agent's code was imported.
GUARDED = (
    "_pytest.runner:call_and_report",
    "_pytest.runner:call_runtest_hook",
    "_pytest.runner:runtestprotocol",
    "_pytest.runner:pytest_runtest_makereport",
    "_pytest.runner:CallInfo.from_call",
    "_pytest.reports:BaseReport.passed",
    "_pytest.reports:BaseReport.failed",
    "_pytest.reports:BaseReport.skipped",
    "_pytest.reports:TestReport.__init__",
    "_pytest.reports:TestReport.from_item_and_call",
    "_pytest.reports:CollectReport.__init__",
    "_pytest.main:pytest_runtestloop",
    "_pytest.main:Session.pytest_runtest_logreport",
    "_pytest.main:Session.pytest_collectreport",
    "_pytest.python:pytest_pyfunc_call",
    "_pytest.python:Function.runtest",
    "_pytest.skipping:pytest_runtest_makereport",
    "_pytest.skipping:evaluate_skip_marks",
    "_pytest.outcomes:fail",
    "_pytest.outcomes:skip",
    "_pytest.outcomes:exit",
    "_pytest.terminal:TerminalReporter.pytest_runtest_logreport",
    "_pytest.terminal:TerminalReporter.summary_stats",
    "_pytest.config:PytestPluginManager.register",
    "pluggy._callers:_multicall",
    "pluggy._hooks:HookCaller.__call__",
    "pluggy._hooks:_HookCaller.__call__",
    "os:write",
    "os:close",
    "os:_exit",
    "json:dumps",
)
# pytest's last line: "3 failed, 1 passed in 0.05s" (between "=" rules unless quiet)
SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s\b")


def skip_reason(report):
    """The reason a skip report gives (its longrepr is (path, line, reason) for skips)."""
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(getattr(report, "wasxfail", "") or longrepr or "")
    return text.replace("Skipped: ", "", 1)[:200]


def resolve(path):
    """What a ``GUARDED`` entry names now (a method's function), or None when absent."""
    module_name, _, attrs = path.partition(":")
    found = sys.modules.get(module_name)
    try:
        for attr in attrs.split("."):
            found = getattr(found, attr, None)
        return getattr(found, "__func__", found)  # a classmethod's function
    except Exception:  # an attribute lookup made to fail: it is not what it was
        return resolve


def snapshot():
    """``GUARDED``, as it is before any of the agent's code was imported."""
    for path in GUARDED:
        try:
            __import__(path.partition(":")[0])
        except ImportError:  # another pytest or pluggy: what it lacks is not compared
            pass
    found = {path: resolve(path) for path in GUARDED}
    return {path: obj for path, obj in found.items() if obj is not None}


class Reporter(object):
    """The child's pytest plugin: per-test outcomes, written once at the session's end,
    with what it saw of tampering."""

    def __init__(self, report_fd, nonce, tests, workdir, mode):
        self.report_fd = report_fd
        self.tests = tests
        self.workdir = workdir
        self.repo = mode == "repo"
        self.process = mode == "process"
        self.rootdir = tests
        self.nonce = nonce
        self.outcomes = {}
        self.reasons = {}
        self.marked = set()  # tests a skip marker of the hidden tests skipped
        self.evaluate_skip_marks = None
        self.guarded = snapshot()
        self.plugins = set()  # ids of the plugins registered once pytest was configured
        self.pytest_dir = os.path.dirname(str(resolve("_pytest.main:__file__") or "/"))

    def configure(self, config):
        """A trylast pytest_configure: after every plugin's own configuration."""
        self.rootdir = str(config.rootpath)
        self.plugins = set(id(p) for p in config.pluginmanager.get_plugins())
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
        if not self.process:  # tests may open the agent's files by relative path
            os.chdir(self.workdir)

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

    def foreign(self, plugin):
        """Whether a plugin registered after configuration is none of pytest's own (an
        object of a class of its package) nor the tests': with the hidden tests, a conftest
        of theirs; with ``--repo``, any module (the repo's conftests, restored first, and
        what they load)."""
        if not isinstance(plugin, type(os)):
            module = sys.modules.get(getattr(type(plugin), "__module__", ""), None)
            return not self.under(getattr(module, "__file__", ""), self.pytest_dir)
        return not self.repo and not self.under(getattr(plugin, "__file__", ""), self.tests)

    @staticmethod
    def under(path, folder):
        """Whether ``path`` is inside ``folder`` (links resolved)."""
        inside = os.path.realpath(folder) + os.sep
        return os.path.realpath(str(path or "/")).startswith(inside)

    def tampering(self, session):
        """What does not add up at the end of the session, from inside the process."""
        found = []
        if type(self.outcomes) is not dict or type(self.reasons) is not dict:
            found.append("run_pytest's record of the outcomes was replaced while tests ran")
        patched = [p for p, obj in self.guarded.items() if resolve(p) is not obj]
        if patched:
            found.append("pytest's internals were patched while tests ran: " + ", ".join(patched))
        try:
            manager = session.config.pluginmanager
            new = [p for p in manager.get_plugins() if id(p) not in self.plugins]
            names = [str(manager.get_name(p) or type(p).__name__) for p in new if self.foreign(p)]
        except Exception as e:  # the plugin manager itself made to fail
            names = ["(the plugin manager failed: %s)" % type(e).__name__]
        if names:
            found.append("a plugin was registered while tests ran: " + ", ".join(names[:5]))
        return found

    def pytest_sessionfinish(self, session, exitstatus):
        found = {
            "nonce": self.nonce,
            "outcomes": dict(self.outcomes),
            "reasons": dict(self.reasons),
            "exitstatus": int(exitstatus),
            "suspicious": self.tampering(session),
        }
        data = _dumps(found).encode()
        while data:
            data = data[_write(self.report_fd, data) :]
        _close(self.report_fd)


def become(user):
    """Drop to the agent's user (uid:gid), with no supplementary groups."""
    uid, _, gid = user.partition(":")
    os.setgroups([])
    os.setgid(int(gid or uid))
    os.setuid(int(uid))


def pytest_argv(mode, workdir, tests, args):
    """pytest's arguments; the hidden tests' come with our configuration and confined
    conftest lookup (and, in-process, the workdir importable)."""
    if mode == "repo":  # the repo's own tests, configuration and conftests, rooted where it says
        return ["-q", "-p", "no:cacheprovider", *args]
    if mode != "process":
        sys.path.append(workdir)
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        "-q",
        "-c",
        os.path.join(here, "pytest.ini"),
        "--rootdir",
        tests,
        "--confcutdir",
        tests,
        *args,  # as the task gives them: "--deselect", "<nodeid>" and "-k", "expr" too
    ]


def agent_plugin(pytest, user, workdir):
    """The ``agent`` fixture's plugin (agent_proxy.py, beside this file, loaded by path)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "agent_proxy.py")
    spec = importlib.util.spec_from_file_location("agent_proxy", path)
    proxy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(proxy)
    return proxy.plugin(pytest, user, workdir, os.path.join(here, "agent_call.py"))


def child(user, workdir, args, report_fd, nonce_fd, log_fd, mode):
    # the nonce is read, and its pipe closed, before pytest loads anything: a repo's
    # conftest.py (the agent's code) is imported before any pytest_configure hook runs
    nonce = os.read(nonce_fd, 64).decode()
    os.close(nonce_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    if mode != "process":  # the agent's code is imported here: not as root
        become(user)
    os.environ["HOME"] = "/tmp"
    # bytecode is read and written in a folder of our own: a .pyc planted in a __pycache__
    # next to a restored file (a conftest.py, whose size and mtime the agent knows) would be
    # run in its place
    sys.pycache_prefix = tempfile.mkdtemp(prefix="agentenv-pycache-")
    # site-packages, and its .pth files, are read only now (as the agent's user, unless the
    # agent's code never runs here): this root parent was started with -S, since an
    # editable install puts the workdir on sys.path, where the agent can leave a
    # sitecustomize.py
    import site

    site.main()
    tests = os.getcwd()  # pytest's invocation directory: args are relative to the tests
    argv = pytest_argv(mode, workdir, tests, args)
    import pytest

    # a wrapper round every other implementation, so it sees the test before a marker
    # skips it (marked on the class's function: a bound method takes no attributes)
    Reporter.pytest_runtest_setup = pytest.hookimpl(hookwrapper=True)(Reporter.runtest_setup)
    Reporter.pytest_configure = pytest.hookimpl(trylast=True)(Reporter.configure)
    reporter = Reporter(report_fd, nonce, tests, workdir, mode)  # before the agent's code
    plugins = [reporter]
    if mode == "process":
        plugins.append(agent_plugin(pytest, user, workdir))
    return int(pytest.main(argv, plugins=plugins))


def parse_args(argv):
    """``[--repo|--process] UID:GID WORKDIR -- ARGS...`` as (mode, user, workdir, pytest's
    args); the mode is ``repo``, ``process`` or ``tests`` (the hidden tests, in-process)."""
    mode = "tests"
    if argv[:1] in (["--repo"], ["--process"]):
        mode, argv = argv[0][2:], argv[1:]
    user, workdir = argv[0], argv[1]
    args = argv[argv.index("--") + 1 :] if "--" in argv else ["."]
    return mode, user, workdir, args


def start_child(user, workdir, args, mode, nonce):
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
            code = child(user, workdir, args, report_w, nonce_r, log_w, mode)
        except BaseException as e:  # whatever happened, the child ends here
            _write(2, ("run_pytest: %s: %s\n" % (type(e).__name__, e)).encode())
            code = 3
        for stream in (sys.stdout, sys.stderr):  # pytest's summary is still in a buffer
            try:
                stream.flush()
            except BaseException:
                pass
        _exit(code)
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
    """The one report carrying ``nonce`` (a dict whose ``outcomes`` may still be anything);
    None else."""
    try:
        found = json.loads(report.decode())
    except (ValueError, RecursionError):
        return None  # none, two, cut, nested past the parser: no verdict
    if isinstance(found, dict) and found.get("nonce") == nonce:
        return found
    return None  # forged without the nonce


def summary_counts(log):
    """The counts of pytest's last summary line in the log (``{"passed": 3, ...}``, with
    ``errors`` and ``warnings`` named in the singular too), or None without one."""
    for line in reversed(log.splitlines()):
        found = SUMMARY.match(line.strip())
        if found:
            counts = {}
            for part in found.group(1).split(", "):
                number, _, word = part.partition(" ")
                counts[word.rstrip("s") if word in ("errors", "warnings") else word] = int(number)
            return counts
    return None


def judge(found, code, log, mode, args):
    """What this parent sees that the report does not account for: its exit status is not
    the process's, pytest counted (or printed) failures it lacks, or it has no summary."""
    outcomes = found.get("outcomes") if isinstance(found.get("outcomes"), dict) else {}
    failures = sum(1 for v in outcomes.values() if v in ("failed", "error"))
    passed = sum(1 for v in outcomes.values() if v == "passed")
    flags = []
    status = found.get("exitstatus")
    if not isinstance(status, int):
        flags.append("the report has no exit status: run_pytest's reporter did not write it")
    elif status != code:
        said = "the test process exited %s after a report of pytest's exit status %s"
        flags.append(said % (code, status))
    if code == 0 and failures:
        flags.append("pytest exited 0, yet the report has %d failures" % failures)
    if code == 1 and not failures:
        flags.append("pytest counted failures (exit 1) that the report does not have")
    counts = summary_counts(log)
    quiet = sum(a.count("q") for a in args if a == "--quiet" or re.match(r"^-q+$", a))
    if counts is None and mode != "repo" and quiet == 0 and outcomes:
        flags.append("pytest's summary is missing from its output: the process ended early")
    elif counts is not None:
        if (counts.get("failed", 0) + counts.get("error", 0) > 0) != (failures > 0):
            flags.append("pytest's summary (%s) does not match the report" % counts)
        elif passed > counts.get("passed", 0):
            flags.append("the report has %d passed, pytest's summary %s" % (passed, counts))
    return flags


def main():
    mode, user, workdir, args = parse_args(sys.argv[1:])
    nonce = os.urandom(16).hex()
    pid, report_r, log_r = start_child(user, workdir, args, mode, nonce)
    report, log, status = drain(pid, report_r, log_r)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    text = log.decode("utf-8", "replace")
    found = verdict(report, nonce)
    line = {"outcomes": None, "reasons": None, "exit": code, "log": text, "suspicious": []}
    if found is not None:
        line["outcomes"], line["reasons"] = found.get("outcomes"), found.get("reasons")
        said = found.get("suspicious")
        line["suspicious"] = [str(s)[:300] for s in said[:10]] if isinstance(said, list) else []
        line["suspicious"] += judge(found, code, text, mode, args)
    sys.stdout.write("\n" + json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
