"""The egress gateway's filtering forward proxy, and the allowlist it applies.

Runs in agentenv's gateway container (stdlib only, Python >= 3.6), never in a sandbox the
agent controls: the sandbox sits on an ``internal`` network with no route out, and this
proxy, also on a normal bridge, is its only way to anything else. It answers HTTP
``CONNECT host:port`` (HTTPS and any TCP) and plain ``http://`` requests, and connects only
where the allowlist lets it:

* ``example.com`` — that name exactly; ``*.example.com`` — any name under it (not itself);
* ``192.0.2.7`` / ``2001:db8::1`` — that address; ``10.0.0.0/8`` — any address in it.

A name is resolved here, once; the proxy connects to the very address it checked (no second
lookup an attacker's DNS could answer differently). An address reached through an allowed
*name* is refused when it is loopback, link-local (cloud metadata), unspecified, multicast
or on the sandbox's own side of the gateway, unless an IP/CIDR entry lists it: a wildcard
name pointing at the gateway itself gains nothing. The host side imports
:func:`normalize` and :func:`Allowlist` to check a task's entries before anything starts.
"""

import ipaddress
import json
import os
import re
import select
import socket
import sys
import threading

READY = "agentenv-egress-ready"
PORT = 3128
_HEAD_MAX = 65536
_IDLE_S = 600.0
_BAD = "%r is not a hostname, '*.suffix', IP address or CIDR (no URLs, ports or paths)"
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def normalize(entry: str) -> str:
    """The canonical form of one allowlist entry (lower case, no trailing dot, compressed
    addresses); raises ``ValueError`` for a URL, a port, a path or a malformed name."""
    host = str(entry).strip().lower().rstrip(".")
    if not host:
        raise ValueError("an allowlist entry must not be empty")
    if "/" in host:
        try:
            return ipaddress.ip_network(host, strict=True).compressed
        except ValueError:
            raise ValueError(_BAD % entry) from None
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    name = host[2:] if host.startswith("*.") else host
    labels = name.split(".")
    ok = all(_LABEL.match(label) for label in labels)
    if not name or not ok:
        raise ValueError(_BAD % entry)
    return host


class Allowlist:
    """Decides where the proxy may connect. ``entries`` are :func:`normalize`-d;
    ``inside`` are the networks on the sandbox's side of the gateway (never reached by name)."""

    def __init__(self, entries, inside=()):
        self.names = set()
        self.suffixes = []
        self.networks = []
        for entry in (normalize(e) for e in entries):
            if entry.startswith("*."):
                self.suffixes.append(entry[1:])  # ".example.com"
            elif _is_address(entry) or "/" in entry:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            else:
                self.names.add(entry)
        self.inside = [ipaddress.ip_network(n, strict=False) for n in inside]

    def name_allowed(self, name):
        """Whether the hostname ``name`` is listed, exactly or under a ``*.`` suffix."""
        name = name.lower().rstrip(".")
        return name in self.names or any(name.endswith(s) for s in self.suffixes)

    def address_allowed(self, address, by_name):
        """Whether to connect to ``address``: listed by IP/CIDR, or reached through an
        allowed name and not a place a name must never lead to (see the module's doc)."""
        ip = ipaddress.ip_address(address)
        if any(ip in net for net in self.networks if net.version == ip.version):
            return True
        if not by_name:
            return False
        special = ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast
        return not special and not any(ip in n for n in self.inside if n.version == ip.version)

    def resolve(self, host, port):
        """The address to connect to for ``host``, or ``None`` with the reason it is refused."""
        host = host.strip("[]")
        by_name = not _is_address(host) and self.name_allowed(host)
        if _is_address(host):
            candidates = [host]
        else:
            try:
                infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
            except (OSError, UnicodeError) as e:
                return None, "cannot resolve %s: %s" % (host, e)
            candidates = [info[4][0] for info in infos]
        for address in candidates:
            if self.address_allowed(address, by_name):
                return address, ""
        return None, "%s is not on the task's network allowlist" % host


def _is_address(text):
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def _split_hostport(text, default_port):
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.partition(":") if text.count(":") == 1 else (text, "", "")
    return host, int(port) if port else default_port


def _read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > _HEAD_MAX:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n"), rest


def _refuse(conn, status, why):
    body = ("agentenv egress: %s\n" % why).encode()
    conn.sendall(
        b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: text/plain\r\nConnection: close"
        b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def _splice(a, b):
    socks = [a, b]
    while True:
        ready, _, _ = select.select(socks, [], [], _IDLE_S)
        if not ready:
            return
        for s in ready:
            data = s.recv(65536)
            if not data:
                return
            (b if s is a else a).sendall(data)


def _target(lines):
    """(host, port, bytes to send upstream first) of a request head; raises ValueError."""
    method, url, version = lines[0].split(" ", 2)
    if method.upper() == "CONNECT":
        host, port = _split_hostport(url, 443)
        return host, port, None
    if not url.lower().startswith("http://"):
        raise ValueError("only CONNECT and absolute http:// URLs go through this proxy")
    hostport, _, path = url[7:].partition("/")
    host, port = _split_hostport(hostport, 80)
    kept = [h for h in lines[1:] if not h.lower().startswith(("proxy-", "connection:"))]
    head = "\r\n".join(["%s /%s %s" % (method, path, version), *kept, "Connection: close"])
    return host, port, (head + "\r\n\r\n").encode("latin-1")


def handle(conn, allow):
    """Serve one client connection: refuse (403) or connect and relay."""
    lines, rest = _read_head(conn)
    if not lines:
        return
    try:
        host, port, first = _target(lines)
    except ValueError as e:
        _refuse(conn, "400 Bad Request", str(e))
        return
    address, why = allow.resolve(host, port)
    _log({"host": host, "port": port, "address": address, "refused": why or None})
    if address is None:
        _refuse(conn, "403 Forbidden", why)
        return
    try:
        upstream = socket.create_connection((address, port), timeout=30)
    except OSError as e:
        _refuse(conn, "502 Bad Gateway", "cannot connect to %s (%s): %s" % (host, address, e))
        return
    with upstream:
        upstream.settimeout(None)
        if first is None:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(first)
        if rest:
            upstream.sendall(rest)
        _splice(conn, upstream)


def _log(record):
    sys.stderr.write(json.dumps(record) + "\n")
    sys.stderr.flush()


def _serve(conn, allow):
    with conn:
        try:
            handle(conn, allow)
        except OSError:
            pass


def main():
    """Listen on :data:`PORT` with the allowlist in ``$AGENTENV_EGRESS`` (JSON:
    ``{"allow": [...], "inside": [...]}``); print :data:`READY` once listening."""
    config = json.loads(os.environ.get("AGENTENV_EGRESS", "{}"))
    allow = Allowlist(config.get("allow", []), config.get("inside", []))
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", PORT))
    server.listen(128)
    print(READY, flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve, args=(conn, allow), daemon=True).start()


if __name__ == "__main__":
    main()
