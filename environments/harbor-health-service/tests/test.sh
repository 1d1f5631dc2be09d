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
score = sum(checks.values()) / len(checks)
rewards = {"reward": score, **{k: float(v) for k, v in checks.items()}}
json.dump(rewards, open("/logs/verifier/reward.json", "w"))
print(rewards)
PY
