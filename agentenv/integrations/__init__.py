"""agentenv as a part of other tools: :mod:`.inspect` is Inspect AI's ``sandbox="agentenv"``."""
