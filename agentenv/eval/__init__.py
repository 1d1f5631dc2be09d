"""Eval jobs: many tasks, each episode run through :mod:`agentenv.runner`'s lifecycle,
recorded to a job folder that resumes (:mod:`.jobs`), and summarised (:mod:`.summary`)."""
