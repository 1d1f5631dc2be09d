"""The site's HTML: the job page and an episode page. Every value is escaped here (it is
the agent's or the model's text); the pages load only their own CSS and script."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from agentenv.agent.tools import ToolResult
from agentenv.agent.trajectory import HarnessRun, Trajectory, Turn
from agentenv.eval.summary import Row
from agentenv.refactor.verdict import TestRun
from agentenv.runner.results import EpisodeResult
from agentenv.verify import Score
from agentenv.verify.score import StepScore
from agentenv.view.artifacts import Listed
from agentenv.view.job import Episode, Job, RepoEpisode

# nothing but the site's own files; no connection of any kind from the page
CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "connect-src 'none'; form-action 'none'; base-uri 'none'"
)
FOLD_LINES = 40  # tool output longer than this shows its head and tail, the rest folded
MAX_SHOWN = 200_000  # characters of one text block on a page; the trajectory file has all
MAX_PAGE = 8_000_000  # characters of an episode's turns on its page, about as much again escaped


def e(value: object) -> str:
    """``value`` as HTML text, quotes escaped too (safe in attributes)."""
    return html.escape(str(value), quote=True)


def _page(title: str, body: str, *, root: str, refresh_s: float | None = None) -> str:
    refresh = f"<meta http-equiv='refresh' content='{refresh_s:g}'>" if refresh_s else ""
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        + refresh
        + f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{e(title)}</title>"
        f"<link rel='stylesheet' href='{root}assets/view.css'>"
        f"<script defer src='{root}assets/view.js'></script>"
        f"</head><body>{body}</body></html>\n"
    )


def _money(usd: float) -> str:
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _stat(name: str, value: str) -> str:
    return (
        f"<div class='stat'><div class='name'>{e(name)}</div>"
        f"<div class='value'>{e(value)}</div></div>"
    )


def _summary(total: Row, k: int) -> str:
    phases = ", ".join(f"{name} {s:.1f} s" for name, s in sorted(total.phases.items()) if s)
    refused = f", {total.refused} refused" if total.refused else ""
    stats = [
        ("episodes", f"{total.episodes} ({total.errors} errors{refused})"),
        ("pass@1", _pct(total.pass_at_1)),
        (f"pass@{k}", _pct(total.pass_at_k)),
        ("mean reward", "—" if total.mean_reward is None else f"{total.mean_reward:.3f}"),
        (
            "tokens in / cached / out",
            f"{total.prompt_tokens:,} / {total.cached_tokens:,} / {total.completion_tokens:,}",
        ),
        ("cache hit rate", _pct(total.cache_hit_rate if total.prompt_tokens else None)),
        ("cost", _money(total.cost_usd)),
        (
            "$ per solved task",
            "—" if total.usd_per_solved is None else _money(total.usd_per_solved),
        ),
        ("time (episodes)", f"{total.wall_s:.1f} s"),
    ]
    return (
        "<section class='summary'>"
        + "".join(_stat(n, v) for n, v in stats)
        + (f"<p class='phases'>time per phase: {e(phases)}</p>" if phases else "")
        + "</section>"
    )


_COLUMNS = (
    "task",
    "sample",
    "status",
    "reward",
    "tags",
    "turns",
    "tokens in",
    "tokens out",
    "cost",
    "wall",
    "ended",  # how, beside the status: the error's kind, or how the agent stopped
)


SUSPICIOUS_MARK = "⚑ suspicious"
"""What marks an episode the verifier flagged (``EpisodeResult.suspicious``)."""


def _reward_text(reward: float | None, flagged: bool, score: Score | None = None) -> str:
    text = "" if reward is None else f"{reward:.2f}"
    if score is not None and score.steps:  # a multi-step task's: each step's, in order
        text += " (" + ", ".join(_step_reward(s) for s in score.steps) + ")"
    return f"{text} {SUSPICIOUS_MARK}".strip() if flagged else text


def _step_reward(step: StepScore) -> str:
    return f"{step.name} {'error' if step.error else f'{step.reward:.2f}'}"


def _flags(result: EpisodeResult, score: Score | None = None) -> list[str]:
    """The verifier's flags for an episode: its line's, else its score's (older lines)."""
    score = score or result.score
    return result.suspicious or (score.suspicious if score is not None else [])


def _row(ep: Episode, rl: bool) -> str:
    r = ep.result
    flagged = bool(_flags(r))
    extra: list[tuple[object, object]] = []
    if rl:
        advantage = "" if ep.advantage is None else f"{ep.advantage:+.3f}"
        extra = [(ep.group or "", ep.group or ""), (advantage, ep.advantage or 0.0)]
    cells: list[tuple[object, object]] = [
        (r.task_id, r.task_id),
        (r.sample, r.sample),
        (ep.status, ep.status),
        (_reward_text(r.reward, flagged, r.score), -1 if r.reward is None else r.reward),
        (" ".join(ep.tags), " ".join(ep.tags)),
        (r.turns, r.turns),
        (f"{r.prompt_tokens:,}", r.prompt_tokens),
        (f"{r.completion_tokens:,}", r.completion_tokens),
        (_money(r.cost_usd), r.cost_usd),
        (f"{r.wall_s:.1f} s", r.wall_s),
        (ep.ended, ep.ended),
        *extra,
    ]
    link = f"episodes/{e(ep.key)}.html"
    tds = "".join(
        f"<td data-sort='{e(key)}'>"
        + (f"<a href='{link}'>{e(text)}</a>" if i == 0 else e(text))
        + "</td>"
        for i, (text, key) in enumerate(cells)
    )
    text = r.task_id + " " + " ".join(ep.tags) + (" suspicious" if flagged else "")
    title = f" title='{e('; '.join(_flags(r)))}'" if flagged else ""
    classes = ep.status + (" suspicious" if flagged else "")
    return (
        f"<tr class='{classes}' data-status='{ep.status}' data-outcome='{e(ep.ended)}' "
        f"data-text='{e(text.lower())}'{title}>{tds}</tr>"
    )


def _charts(charts: list[tuple[str, str]], missing: str | None, notes: Sequence[str]) -> str:
    if missing:
        return f"<p class='note'>{e(missing)}</p>"
    images = "".join(
        f"<figure><img src='{e(src)}' alt='{e(what)}'></figure>" for src, what in charts
    )
    said = "".join(f"<p class='note'>{e(note)}</p>" for note in notes)
    return (f"<section class='charts'>{images}</section>" if images else "") + said


def _filters(
    outcomes: Sequence[str],
    text_label: str,
    outcome_label: str = "outcome",
    statuses: Sequence[str] = ("passed", "failed", "error"),
) -> str:
    """The table's controls (view.js finds them by id): status (of ``statuses``), outcome
    (the rows' ``data-outcome``, named ``outcome_label``), free text."""
    return (
        "<div class='filters'>"
        "<label>show <select id='status'><option value=''>all</option>"
        + "".join(f"<option>{e(s)}</option>" for s in statuses)
        + "</select></label>"
        f"<label>{e(outcome_label)} <select id='outcome'><option value=''>any</option>"
        + "".join(f"<option>{e(o)}</option>" for o in outcomes)
        + "</select></label>"
        f"<label>{e(text_label)} <input id='text' type='search' placeholder='filter'></label>"
        "<span id='shown'></span></div>"
    )


def job_page(
    job: Job,
    rows: list[Row],
    charts: list[tuple[str, str]],
    missing: str | None = None,
    notes: Sequence[str] = (),
    *,
    refresh_s: float | None = None,
) -> str:
    """The job's page: its summary (``rows`` from :func:`summarize`, the total last), its
    charts (``(file, what it shows)``, or ``missing`` saying why there are none; ``notes``
    say why some were left out), and every episode, sortable and filterable; reloading
    itself every ``refresh_s`` if given."""
    k = max(job.samples, 1)
    total = rows[-1] if rows else None
    outcomes = sorted({ep.ended for ep in job.episodes})
    refused = ("refused",) if any(ep.status == "refused" for ep in job.episodes) else ()
    filters = _filters(outcomes, "task or tag", "ended", ("passed", "failed", "error", *refused))
    rl = any(ep.group is not None for ep in job.episodes)
    columns = (*_COLUMNS, "group", "advantage") if rl else _COLUMNS
    head = "".join(f"<th data-col='{i}'>{e(c)}</th>" for i, c in enumerate(columns))
    table = (
        f"<table id='episodes'><thead><tr>{head}</tr></thead><tbody>"
        + "".join(_row(ep, rl) for ep in job.episodes)
        + "</tbody></table>"
    )
    title = f"{job.title}" + (f" — {job.model}" if job.model else "")
    body = (
        f"<h1>{e(title)}</h1>"
        + (_summary(total, k) if total else "<p>No finished episode yet.</p>")
        + _charts(charts, missing, notes)
        + filters
        + table
    )
    return _page(title, body, root="", refresh_s=refresh_s)


# -- an episode ------------------------------------------------------------------------------


def _clip(text: str) -> str:
    """At most :data:`MAX_SHOWN` characters of ``text`` (a page of megabytes of one output
    helps nobody and slows every browser), its head and tail, saying what was left out."""
    if len(text) <= MAX_SHOWN:
        return text
    half = MAX_SHOWN // 2
    return (
        f"{text[:half]}\n… {len(text) - 2 * half:,} characters not shown (the trajectory file "
        f"has them) …\n{text[-half:]}"
    )


def _fold(text: str) -> str:
    text = _clip(text)
    lines = text.splitlines()
    if len(lines) <= FOLD_LINES:
        return f"<pre>{e(text)}</pre>"
    head, middle, tail = lines[:20], lines[20:-20], lines[-20:]
    return (
        f"<pre>{e(chr(10).join(head))}</pre>"
        f"<details class='folded'><summary>{len(middle)} more lines</summary>"
        f"<pre>{e(chr(10).join(middle))}</pre></details>"
        f"<pre>{e(chr(10).join(tail))}</pre>"
    )


def _arguments(raw: str) -> str:
    """A tool call's arguments, indented when they are JSON of a sensible size (indenting
    deeply nested JSON grows as the square of its depth)."""
    if len(raw) > MAX_SHOWN:
        return raw
    try:
        pretty = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return raw  # shown as the model sent it: a malformed call is worth seeing
    return pretty if len(pretty) <= 4 * len(raw) + 1000 else raw


def _call(raw: str) -> str:
    """A tool call's arguments as HTML. An object with a string of several lines in it (a
    ``write_file``'s content, a script) is shown argument by argument, its one-line values
    first (a path), then each string of several lines as a block with its lines kept;
    anything else as :func:`_arguments` gives it."""
    try:
        parsed = json.loads(raw) if len(raw) <= MAX_SHOWN else None
        if not isinstance(parsed, dict):
            raise ValueError("not an object")
        blocks = {k: v for k, v in parsed.items() if isinstance(v, str) and "\n" in v}
        if not blocks:
            raise ValueError("nothing of several lines")
        lines = {
            k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for k, v in parsed.items()
            if k not in blocks
        }
    except (ValueError, RecursionError):
        return f"<pre>{e(_clip(_arguments(raw)))}</pre>"
    return (
        "<div class='args'>"
        + "".join(
            f"<div class='arg'><span class='key'>{e(k)}</span> <code>{e(_clip(v))}</code></div>"
            for k, v in lines.items()
        )
        + "".join(
            f"<div class='arg'><span class='key'>{e(k)}</span>{_fold(v)}</div>"
            for k, v in blocks.items()
        )
        + "</div>"
    )


def _message(message: dict[str, Any]) -> str:
    role = str(message.get("role", "?"))
    content = message.get("content")
    if isinstance(content, list):  # content parts: their text
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return (
        f"<div class='message {e(role)}'><div class='role'>{e(role)}</div>"
        f"{_fold(str(content or ''))}</div>"
    )


def _result(result: ToolResult) -> str:
    status = "error" if result.error else "ok"
    code = "" if result.exit_code is None else f"exit {result.exit_code} · "
    return (
        f"<div class='result {status}'><div class='name'>← {e(result.name)} "
        f"({e(code)}{result.duration_s:.2f} s)</div>{_fold(result.output or result.text)}</div>"
    )


def _turn(number: int, turn: Turn) -> str:
    c = turn.completion
    u = c.usage
    facts = [
        f"{u.prompt_tokens:,} in ({u.cached_tokens:,} cached)",
        f"{u.completion_tokens:,} out",
        _money(c.cost_usd),
        f"model {turn.model_s:.2f} s",
        f"tools {turn.tools_s:.2f} s",
        f"paused {turn.paused_s:.2f} s",
    ]
    if c.retries:
        facts.append(f"{c.retries} retries")
    if c.route is not None:
        facts.append(f"endpoint {c.route.endpoint}")
    if turn.policy_version is not None:
        facts.append(f"policy {turn.policy_version}")
    parts = [f"<div class='facts'>{e(' · '.join(facts))}</div>"]
    if c.reasoning_content:
        parts.append(
            "<details class='reasoning'><summary>reasoning "
            f"({len(c.reasoning_content):,} characters)</summary>"
            f"<pre>{e(_clip(c.reasoning_content))}</pre></details>"
        )
    if c.content:
        parts.append(f"<div class='content'>{_fold(c.content)}</div>")
    results = {r.call_id: r for r in turn.tool_results}
    for call in c.tool_calls:
        parts.append(
            f"<div class='call'><div class='name'>→ {e(call.name)}</div>"
            f"{_call(call.arguments)}</div>"
        )
        if call.id in results:
            parts.append(_result(results.pop(call.id)))
    parts.extend(_result(r) for r in results.values())  # answering no call we kept
    return f"<section class='turn'><h3>turn {number}</h3>{''.join(parts)}</section>"


def _turns(turns: Sequence[Turn]) -> list[str]:
    """The turns' HTML, up to :data:`MAX_PAGE` characters: a page the browser can open."""
    out: list[str] = []
    size = 0
    for number, turn in enumerate(turns, 1):
        html_turn = _turn(number, turn)
        size += len(html_turn)
        if size > MAX_PAGE and out:
            left = len(turns) - number + 1
            out.append(f"<p class='note'>{left:,} more turns not shown: the page would be too "
                       "large to open; the trajectory file has them.</p>")  # fmt: skip
            break
        out.append(html_turn)
    return out


def _checks(score: Score | None) -> str:
    if score is None:
        return "<p>Not verified.</p>"
    rows = "".join(
        f"<tr class='{'passed' if c.passed else 'failed'}'><td>{e(c.name)}</td>"
        f"<td>{c.score:.2f}</td><td>{'passed' if c.passed else 'failed'}</td>"
        f"<td>{_fold(c.detail) if c.detail else ''}</td></tr>"
        for c in score.checks
    )
    error = f"<p class='error'>{e(score.error)}</p>" if score.error else ""
    return (
        f"<p>reward {score.reward:.3f} · {'passed' if score.passed else 'failed'}</p>{error}"
        + _steps(score)
        + f"<table class='checks'><thead><tr><th>check</th><th>score</th><th>verdict</th>"
        f"<th>detail</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _steps(score: Score) -> str:
    """A multi-step task's steps, each with its reward, in the order they ran."""
    if not score.steps:
        return ""
    rows = "".join(
        f"<tr class='{'passed' if s.passed else 'failed'}'><td>{e(s.name)}</td>"
        f"<td>{'error' if s.error else f'{s.reward:.2f}'}</td>"
        f"<td>{'stopped the task' if s.stopped else ''}</td>"
        f"<td>{_fold(s.error or s.detail)}</td></tr>"
        for s in score.steps
    )
    return (
        "<table class='checks steps'><thead><tr><th>step</th><th>reward</th><th></th>"
        f"<th>detail</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def episode_page(
    episode: Episode,
    trajectory: Trajectory | None,
    problems: Sequence[str] = (),
    artifacts: Sequence[Listed] = (),
) -> str:
    """One episode's page: the conversation as sent, turn by turn, then its checks and
    its artifacts; ``problems`` say why its trajectory could not be read."""
    r = episode.result
    title = f"{r.task_id} #{r.sample}"
    facts = (
        f"{episode.status} · reward {'—' if r.reward is None else f'{r.reward:.2f}'} · "
        f"{r.turns} turns · {_money(r.cost_usd)} · {r.wall_s:.1f} s · {episode.ended}"
    )
    if r.agent is not None:
        facts += f" · played by {r.agent}"
    if episode.group is not None:
        facts += f" · group {episode.group}"
    if episode.advantage is not None:
        facts += f" · advantage {episode.advantage:+.3f}"
    score = r.score or (trajectory.score if trajectory is not None else None)
    flags = _flags(r, score)
    if flags:
        facts += f" · {SUSPICIOUS_MARK}"
    parts = [
        f"<p><a href='../index.html'>← the job</a></p><h1>{e(title)}</h1>",
        f"<p class='facts'>{e(facts)}</p>",
    ]
    if r.error:
        parts.append(f"<p class='error'>{e(r.error)}</p>")
    if flags:
        items = "".join(f"<li>{e(flag)}</li>" for flag in flags)
        parts.append(
            f"<div class='suspicious'><p>{SUSPICIOUS_MARK}: the verifier saw signs of an "
            f"attempt on the verdict (the check's <code>on_suspicious</code> says whether it "
            f"then scored 0); worth a look:</p><ul>{items}</ul></div>"
        )
    parts.extend(
        f"<p class='error'>Its trajectory could not be read: {e(problem)}</p>"
        for problem in problems
    )
    if r.outcome == "refused":
        # nothing ran: no trajectory, no verification; the reason is the error above
        parts.append("<p>This task was refused when it was loaded: no episode ran.</p>")
        return _page(title, "".join(parts), root="../")
    if trajectory is None and not problems:
        parts.append("<p>No trajectory was written for this episode.</p>")
    if trajectory is not None:
        first = [m for m in trajectory.messages[:2] if m.get("role") in ("system", "user")]
        parts.append("<h2>prompt</h2>" + "".join(_message(m) for m in first))
        parts.append("<h2>turns</h2>")
        parts.extend(_turns(trajectory.turns))
        if trajectory.harness is not None:
            parts.append(_harness(trajectory.harness))
    parts.append("<h2>verification</h2>" + _checks(score))
    if artifacts:
        parts.append(_artifacts(r.artifacts or "", artifacts))
    return _page(title, "".join(parts), root="../")


def _harness(run: HarnessRun) -> str:
    """How the harness that played the episode ran: its exit, why it was stopped, where its
    time went (the model's, the sandbox frozen, vs its own) and its log's tail."""
    exit_code = "—" if run.exit_code is None else str(run.exit_code)
    facts = [
        f"{run.name} {run.version}",
        f"exit {exit_code}",
        f"stopped: {run.stopped}" if run.stopped else "ended by itself",
        f"wall {run.wall_s:.2f} s",
        f"model {run.model_s:.2f} s",
        f"harness {run.harness_s:.2f} s",
    ]
    log = _fold(run.log) if run.log else "<p class='note'>It wrote nothing.</p>"
    return (
        f"<h2>harness</h2><section class='harness'><div class='facts'>"
        f"{e(' · '.join(facts))}</div><div class='name'>its output and log (the tail)</div>"
        f"{log}</section>"
    )


def _artifacts(folder: str, listed: Sequence[Listed]) -> str:
    """The episode's artifacts: name, size, and a text file's start (folded)."""
    rows = "".join(
        f"<tr><td><code>{e(a.name)}</code></td><td>{a.size:,}</td><td>"
        + (_fold(a.preview) if a.preview is not None else "")
        + "</td></tr>"
        for a in listed
    )
    return (
        f"<h2>artifacts</h2><p>in the job folder at <code>{e(folder)}</code></p>"
        f"<table><thead><tr><th>file</th><th>bytes</th><th>text</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


# -- a refactor job ----------------------------------------------------------------------------

_REPO_COLUMNS = ("repo", "status", "outcome", "tests before", "tests after", "files", "+ / −",
                 "turns", "cost", "wall")  # fmt: skip


def _tests(run: TestRun | None) -> str:
    return "—" if run is None else run.verdict


def _repo_row(repo: RepoEpisode) -> str:
    r = repo.result
    cells: list[tuple[object, object]] = [
        (r.repo, r.repo),
        (repo.status, repo.status),
        (r.outcome, r.outcome),
        (_tests(r.before), _tests(r.before)),
        (_tests(r.after), _tests(r.after)),
        (r.files_changed, r.files_changed),
        (f"+{r.insertions} −{r.deletions}", r.insertions + r.deletions),
        (r.turns, r.turns),
        (_money(r.cost_usd), r.cost_usd),
        (f"{r.wall_s:.1f} s", r.wall_s),
    ]
    link = f"episodes/{e(repo.key)}.html"
    tds = "".join(
        f"<td data-sort='{e(key)}'>" + (f"<a href='{link}'>{e(text)}</a>" if i == 0 else e(text))
        + "</td>"
        for i, (text, key) in enumerate(cells)
    )  # fmt: skip
    return (
        f"<tr class='{repo.status}' data-status='{repo.status}' data-outcome='{e(r.outcome)}' "
        f"data-text='{e(r.repo.lower())}'>{tds}</tr>"
    )


def refactor_page(job: Job, *, refresh_s: float | None = None) -> str:
    """A refactor job's page: the instruction, the outcomes, every repo in the table."""
    results = [repo.result for repo in job.repos]
    solved = sum(1 for repo in job.repos if repo.status == "passed")
    cost = sum(r.cost_usd for r in results)
    stats = [
        ("repos", str(len(results))),
        ("changed, tests green", str(solved)),
        ("tokens in / cached / out", f"{sum(r.prompt_tokens for r in results):,} / "
         f"{sum(r.cached_tokens for r in results):,} / "
         f"{sum(r.completion_tokens for r in results):,}"),
        ("cost", _money(cost)),
        ("$ per solved repo", _money(cost / solved) if solved else "—"),
        ("time (repos)", f"{sum(r.wall_s for r in results):.1f} s"),
    ]  # fmt: skip
    outcomes = sorted({r.outcome for r in results})
    filters = _filters(outcomes, "repo")
    head = "".join(f"<th data-col='{i}'>{e(c)}</th>" for i, c in enumerate(_REPO_COLUMNS))
    title = f"{job.title}" + (f" — {job.model}" if job.model else "")
    body = (
        f"<h1>{e(title)}</h1>"
        + (f"<pre class='instruction'>{e(job.instruction)}</pre>" if job.instruction else "")
        + "<section class='summary'>"
        + "".join(_stat(n, v) for n, v in stats)
        + "</section>"
        + filters
        + f"<table id='episodes'><thead><tr>{head}</tr></thead><tbody>"
        + "".join(_repo_row(repo) for repo in job.repos)
        + "</tbody></table>"
    )
    return _page(title, body, root="", refresh_s=refresh_s)


def _diff(patch: str) -> str:
    lines = []
    for line in _clip(patch).splitlines():
        kind = (
            "file" if line.startswith(("diff --git", "+++ ", "--- ", "index "))
            else "hunk" if line.startswith("@@")
            else "add" if line.startswith("+")
            else "del" if line.startswith("-")
            else "same"
        )  # fmt: skip
        lines.append(f"<span class='{kind}'>{e(line)}</span>")
    return "<pre class='diff'>" + "\n".join(lines) + "</pre>"


def _test_run(name: str, run: TestRun | None) -> str:
    if run is None:
        return f"<h3>{e(name)}: not run</h3>"
    return (
        f"<h3>{e(name)}: {e(run.verdict)} ({run.duration_s:.1f} s)</h3>"
        f"<div class='facts'>{e(run.command)}</div>{_fold(run.tail)}"
    )


def repo_page(
    repo: RepoEpisode,
    trajectory: Trajectory | None,
    patch: str | None,
    problems: Sequence[str] = (),
) -> str:
    """A repo's page: its outcome, the patch as a coloured diff, the tests before and after,
    then the agent's conversation turn by turn; ``problems`` say what could not be read."""
    r = repo.result
    facts = (
        f"{r.outcome} · {r.files_changed} files, +{r.insertions} −{r.deletions} · "
        f"{r.turns} turns · {_money(r.cost_usd)} · {r.wall_s:.1f} s"
    )
    parts = [
        f"<p><a href='../index.html'>← the job</a></p><h1>{e(r.repo)}</h1>",
        f"<p class='facts'>{e(facts)}</p>",
    ]
    if r.error:
        parts.append(f"<p class='error'>{e(r.error)}</p>")
    parts.extend(f"<p class='note'>{e(note)}</p>" for note in r.notes)
    parts.append("<h2>patch</h2>" + (_diff(patch) if patch else "<p>No patch.</p>"))
    parts.append("<h2>tests</h2>" + _test_run("before", r.before) + _test_run("after", r.after))
    parts.extend(f"<p class='error'>Not shown: {e(problem)}</p>" for problem in problems)
    if trajectory is not None:
        parts.append("<h2>turns</h2>")
        parts.extend(_turns(trajectory.turns))
    return _page(r.repo, "".join(parts), root="../")
