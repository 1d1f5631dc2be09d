"""Eval jobs: many tasks, each episode run through :mod:`agentenv.runner`'s lifecycle,
recorded to a job folder that resumes (:mod:`.jobs`), summarised (:mod:`.summary`), and
spread over a Ray cluster where asked (:mod:`.ray_executor`, ``agentenv[ray]``)."""
