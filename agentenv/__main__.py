"""``python -m agentenv`` runs the command line."""

from agentenv.cli import main

main()
