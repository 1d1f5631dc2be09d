"""An installed harness's side of the model channel, run in the sandbox as its user::

    python3 -I -c "$(cat forward.py)" STATE PORT SOCKET MAX_LOG_BYTES -- ARGV...

Detaches (its own session, so it outlives the command that started it and the host process
behind that), then relays every connection to ``127.0.0.1:PORT`` to the Unix socket
``SOCKET`` (the model gateway, mounted from the host: a sandbox with no network reaches it
only so), and runs ``ARGV`` in a process group of its own with its output appended to
``STATE/log``. When ``ARGV`` ends, or its output passes ``MAX_LOG_BYTES`` (its group is then
killed), writes ``STATE/status`` (JSON: exit_code, signal, flood, error) and exits.
The command that starts it returns once the harness is started, printing ``SUPERVISOR CHILD``
(this program's pid and the harness's process group): the host stops it early with SIGTERM
to the first (the harness's group is killed and the status written) and SIGKILL to the
second. The host never reads a file of STATE while the harness runs: the agent may replace
any of them (a FIFO, a huge sparse file). ``STATE/pid`` holds the same two numbers, for
people.

Shipped as text (``-c``), not installed: stdlib only, Python >= 3.6.
"""

import json
import os
import select
import signal
import socket
import sys
import threading
import time

CHUNK = 65536


def pipe(src, dst):
    """Copy ``src`` to ``dst`` until either end closes, then close both ways."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(client, path):
    """One connection: to the gateway's socket, both directions."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


def serve(listener, path):
    """Accept connections forever (a daemon thread: ends with the program)."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            continue
        threading.Thread(target=relay, args=(client, path), daemon=True).start()


def write(path, text):
    """Write a file whole, atomically (a reader never sees half of it); never opening what
    the agent may have put in the way (a FIFO would block, a symlink lead elsewhere)."""
    tmp = path + ".tmp"
    try:
        os.unlink(tmp)
    except OSError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def detach():
    """Become a daemon (our session our own); the starter stays until the daemon reports
    the pids (or gives up: end of file), prints them, and returns. Returns the report's
    write end (not inherited by what is executed: os.pipe's ends never are)."""
    report_r, report_w = os.pipe()
    if os.fork() > 0:
        os.close(report_w)
        data = b""
        while len(data) < 64:
            chunk = os.read(report_r, 64)
            if not chunk:
                break
            data += chunk
        os.write(1, data)
        os._exit(0)
    os.close(report_r)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    return report_w


def spawn(argv, listener):
    """Start ``argv`` in a process group of its own, its output into a pipe; returns the
    child's pid and the pipe's read end."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, 0)
            os.dup2(write_end, 1)
            os.dup2(write_end, 2)
            os.close(read_end)
            listener.close()
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, ("cannot start %s: %s\n" % (argv[0], e)).encode())
        os._exit(127)
    os.close(write_end)
    return child, read_end


def kill_group(child):
    """SIGKILL the child's process group (what is gone already is no error)."""
    try:
        os.killpg(child, signal.SIGKILL)
    except OSError:
        pass


def watch(child, read_end, log, max_log):
    """Copy the child's output to ``log`` until it has exited and what it wrote is read
    (not until the pipe's EOF: a process it left outside its group, a daemon, may hold the
    pipe open for ever); past ``max_log`` bytes its group is killed. Returns its wait status
    and whether it flooded."""
    flood = False
    written = 0
    status = None
    drain_until = 0.0
    while True:
        ready = select.select([read_end], [], [], 0.2)[0]
        data = os.read(read_end, CHUNK) if ready else b""
        if ready and not data:
            break  # every writer is gone
        if data and written < max_log:
            log.write(data[: max_log - written])
            log.flush()
        written += len(data)
        if written > max_log and not flood:
            flood = True
            kill_group(child)
        if status is None:
            pid, code = os.waitpid(child, os.WNOHANG)
            if pid:
                status = code
                drain_until = time.time() + 1.0
        if status is not None and (not ready or time.time() > drain_until):
            break
    if status is None:
        _, status = os.waitpid(child, 0)
    return status, flood


def close_report(report):
    """Close the report's write end once (the starter then returns)."""
    if report:
        os.close(report.pop())


def run(state, port, path, max_log, argv, report):
    """Listen, start ``argv``, report the pids, watch its output, and return the status to
    write."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    try:
        child, read_end = spawn(argv, listener)
    except OSError as e:
        return {"error": "cannot start: %s" % e}
    # SIGTERM (the host stopping it): its group is killed, and the watch ends with a status
    signal.signal(signal.SIGTERM, lambda signum, frame: kill_group(child))
    pids = "%d %d\n" % (os.getpid(), child)
    os.write(report[0], pids.encode())
    close_report(report)
    write(os.path.join(state, "pid"), pids)
    with open(os.path.join(state, "log"), "ab") as log:
        status, flood = watch(child, read_end, log, max_log)
    kill_group(child)  # what it left running in its group goes with it
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status), "flood": flood}
    return {"exit_code": os.WEXITSTATUS(status), "flood": flood}


def main():
    """Parse the arguments, detach, run, and write the status whatever happened."""
    args = sys.argv[1:]
    split = args.index("--")
    state, port, path, max_log = args[:split]
    argv = args[split + 1 :]
    report = [detach()]
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        result = run(state, int(port), path, int(max_log), argv, report)
    except Exception as e:  # whatever it was, the host must hear of it
        result = {"error": "%s: %s" % (type(e).__name__, e)}
    close_report(report)  # the starter ends (with no pids) if run failed before reporting
    write(os.path.join(state, "status"), json.dumps(result))


if __name__ == "__main__":
    main()
