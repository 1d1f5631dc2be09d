"""Test helpers that ship with agentenv: the sandbox conformance suite."""
