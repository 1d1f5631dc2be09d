"""Refactor jobs: one codemod or agent over many git repos, each repo's tests run before and
after through :mod:`agentenv.runner`'s lifecycle (:mod:`.job`); the repos themselves, their
list, clones and patches (:mod:`.repos`)."""
