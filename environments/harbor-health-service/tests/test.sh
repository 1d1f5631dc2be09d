#!/bin/bash
# Harbor's way: the service the agent left must answer in its own container.
python3 - <<'PY'
import json, time, urllib.error, urllib.request

def get(path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:8080" + path, timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return None, ""

for _ in range(50):  # a moment for a service just thawed
    if get("/health")[0] is not None:
        break
    time.sleep(0.1)
version = open("/app/VERSION").read()
checks = {
    "health": get("/health") == (200, "ok"),
    "version": get("/version") == (200, version),
    "not_found": get("/nope")[0] == 404,
}
# No credit for an answer that holds whatever the path: a server that answers 404 to
# everything earns nothing for its 404, one that answers "ok" everywhere nothing for its
# /health. An endpoint counts only when the service also tells paths apart.
routed = checks["not_found"] and (checks["health"] or checks["version"])
score = sum(checks.values()) / len(checks) if routed else 0.0
rewards = {"reward": score, **{k: float(v) for k, v in checks.items()}}
json.dump(rewards, open("/logs/verifier/reward.json", "w"))
print(rewards)
PY
