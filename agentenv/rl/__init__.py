"""RL rollouts: episodes driven turn by turn, in groups or streams, suspended and resumed
(:mod:`.rollout`), and eval episodes spread over a Ray cluster (:mod:`.ray_executor`); each
goes through :mod:`agentenv.runner`'s lifecycle."""
