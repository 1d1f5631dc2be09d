"""What each way an episode can end means for the job: one table, not scattered excepts.

An agent that fails (wrong answer, gave up, hit a limit, overflowed its context) is a
*result*: graded, its reward valid. The infrastructure failing under it (container died,
engine hiccup, endpoint down) is retried, then recorded as an error without a reward. A
broken verifier or task is an error too, but retrying cannot fix it; a refused key stops the
whole job, since every other episode would fail the same way. A task refused at load (a
folder of mixed tasks) is a row of its own: recorded with its reason, never run, never
retried, and neither graded nor counted as an error.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from agentenv.errors import (
    AuthError,
    BadRequest,
    ContextOverflow,
    EndpointUnavailable,
    ImageUnavailable,
    NoRoute,
    SandboxError,
    TaskError,
)

Outcome = Literal[
    "graded",  # the agent ran and the verifier scored it (whatever the reward)
    "verifier_error",  # the verifier could not score (crashed, timed out, missing)
    "sandbox_lost",  # the container died or the engine hiccuped under the episode
    "endpoint_down",  # the model endpoint stayed down past the client's retries
    "bad_request",  # the endpoint refused the request (400): a bug or a misconfiguration
    "auth",  # 401/403: the key is wrong or the account is out of credit
    "task_error",  # the task cannot run (no image, no solution.sh for the oracle)
    "crash",  # anything else: a bug in agentenv
    "refused",  # the task did not load (a field not supported, say): no episode ran
    "no_internet",  # the task asks for the internet and this host has none: not run
]


class Treatment(NamedTuple):
    """How the job treats an outcome (a model policy is another thing: :mod:`.policy`)."""

    retry: bool  # run the episode again (up to the job's attempts)
    graded: bool  # the reward is valid and counts in pass@k
    stop_job: bool  # no point running anything else


TREATMENT: dict[Outcome, Treatment] = {
    "graded": Treatment(retry=False, graded=True, stop_job=False),
    "verifier_error": Treatment(retry=False, graded=False, stop_job=False),
    "sandbox_lost": Treatment(retry=True, graded=False, stop_job=False),
    "endpoint_down": Treatment(retry=True, graded=False, stop_job=False),
    "bad_request": Treatment(retry=False, graded=False, stop_job=False),
    "auth": Treatment(retry=False, graded=False, stop_job=True),
    "task_error": Treatment(retry=False, graded=False, stop_job=False),
    "crash": Treatment(retry=False, graded=False, stop_job=False),
    "refused": Treatment(retry=False, graded=False, stop_job=False),
    # never run on this host, so not retried in the run; a resume (on a host with the
    # internet, say) runs it again
    "no_internet": Treatment(retry=True, graded=False, stop_job=False),
}


def is_error(outcome: Outcome) -> bool:
    """Whether an episode that ended so is an error: it ran (or was to) and was not graded.
    A refused task is not one: it never ran (its count is apart, and ``--retry-errors``
    cannot help it: the task must change)."""
    return not TREATMENT[outcome].graded and outcome != "refused"


def classify(error: BaseException) -> Outcome:
    """The outcome of an episode that raised ``error`` (see :mod:`agentenv.errors`)."""
    if isinstance(error, AuthError):
        return "auth"
    if isinstance(error, BadRequest) and not isinstance(error, ContextOverflow):
        return "bad_request"
    if isinstance(error, EndpointUnavailable):  # incl. rate limits, cut streams, all down
        return "endpoint_down"
    if isinstance(error, TaskError | ImageUnavailable | NoRoute):
        return "task_error"
    if isinstance(error, SandboxError):
        return "sandbox_lost"
    return "crash"
