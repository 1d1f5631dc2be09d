"""The checker programs verifiers run inside checker sandboxes (stdlib only, Python >= 3.6).
Installed as ``agentenv._checkers``; nothing here is imported by agentenv itself."""
