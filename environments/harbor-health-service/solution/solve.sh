#!/bin/bash
cat > /app/service.py <<'PY'
import http.server

VERSION = open("/app/VERSION").read()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/health": "ok", "/version": VERSION}.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", 8080), Handler).serve_forever()
PY
nohup python3 /app/service.py >/dev/null 2>&1 &
for i in $(seq 50); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/health')" 2>/dev/null && break; sleep 0.1; done
