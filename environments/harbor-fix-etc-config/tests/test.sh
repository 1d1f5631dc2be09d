#!/bin/bash
python3 - <<'PY'
import configparser, json, os, subprocess

text = open("/etc/reportd/reportd.conf").read()
conf = configparser.ConfigParser()
parsed = True
try:
    conf.read_string(text)
except configparser.Error:
    parsed = False


def get(section, key):
    return conf.get(section, key, fallback=None) if parsed else None


checks = {
    "starts": subprocess.run(["/app/check-config"], capture_output=True).returncode == 0,
    "port": (get("server", "port") or "").isdigit() and 1 <= int(get("server", "port")) <= 65535,
    "kept": get("server", "listen") == "127.0.0.1" and get("storage", "keep_days") == "30",
    "comments": "# reportd configuration" in text and "# where reports are kept" in text,
}
reward = sum(checks.values()) / len(checks) if checks["starts"] else 0.0
json.dump({"reward": reward, **{k: float(v) for k, v in checks.items()}},
          open("/logs/verifier/reward.json", "w"))
print(checks, reward)
PY
