"""``agentenv view``: a job folder (eval) or one trajectory file as a static site, read
offline in any browser: a job page (the summary, every episode in a table to sort and
filter) and one page per episode (the conversation as sent, each turn's reasoning, tool
calls and results, its cost and times, the verifier's checks).

Everything shown is the agent's or the model's, so everything is escaped, the pages carry
a Content-Security-Policy that allows only their own files, and nothing is fetched at view
time (no CDN, no fonts): what is on the disk is the whole site."""

from agentenv.view.site import build_site

__all__ = ["build_site"]
