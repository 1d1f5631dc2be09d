#!/bin/bash
# Whether reportd would start, judged here and not by /app/check-config: the agent could
# replace that program (an empty script "succeeds"). The repair must also keep the rest of
# the configuration as it was: a storage path moved to an existing folder or a rewritten
# file makes the checker happy and is not the fix asked for, so the reward is all or nothing.
python3 - <<'PY'
import configparser, json, os

text = open("/etc/reportd/reportd.conf").read()
conf = configparser.ConfigParser()
parsed = True
try:
    conf.read_string(text)
except configparser.Error:
    parsed = False


def get(section, key):
    return conf.get(section, key, fallback=None) if parsed else None


port = get("server", "port") or ""
path = get("storage", "path")
checks = {
    "starts": bool(path) and os.path.isdir(path),
    "port": port.isdigit() and 1 <= int(port) <= 65535,
    "kept": get("server", "listen") == "127.0.0.1"
    and get("storage", "keep_days") == "30"
    and path == "/var/lib/reportd/reports",
    "comments": "# reportd configuration" in text and "# where reports are kept" in text,
}
reward = float(all(checks.values()))
json.dump({"reward": reward, **{k: float(v) for k, v in checks.items()}},
          open("/logs/verifier/reward.json", "w"))
print(checks, reward)
PY
