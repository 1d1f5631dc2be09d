"""RL rollouts: episodes driven turn by turn, in groups or streams, suspended and resumed
(:mod:`.rollout`); each goes through :mod:`agentenv.runner`'s lifecycle."""
