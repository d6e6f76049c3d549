"""Is a recipe run a valid submission? AgentX's rules (agentx-harness 1.0.12), each reason named as AIPerf names it.

- the configured duration is under the minimum (900 s): AIPerf refuses to start unless ``--unsafe-override``;
- more than 1 % of responses were context overflows: ``context_overflow_rate_exceeded``;
- more than 10 % of calls failed: AIPerf cancels the run (``--failed-request-threshold 0.10``);
- the run was stopped early (a signal, an abort): ``run_cancelled``;
- under 95 % of the window's 1 s slices saw a first token or a token: ``insufficient_profile_metric_coverage``;
- a locked setting was changed: trace delays (``--tool-time``), cache busting (``--no-salt-tasks``), forced length;
- the workload is not the corpus the run requires (``--recipe-fingerprint``; AIPerf marks a local trace directory
  ``unsafe_override``): ``corpus_mismatch``.
"""

from __future__ import annotations

from typing import Any


def submission(
    recipe: dict[str, Any], header: dict[str, Any], footer: dict[str, Any] | None, finals: tuple[int, int, int],
    share: float | None,
) -> dict[str, Any]:  # fmt: skip
    """``submission_valid`` and ``invalid_reasons`` (each a tag, a colon and what was found); ``finals``: calls
    (after their retries), those that failed, those refused as a context overflow; ``share``: the slices covered."""
    reasons: list[str] = []
    load = header.get("load") or {}
    minimum = recipe.get("min_duration_s")
    duration = load.get("duration_s")
    if minimum is not None and (duration is None or duration < minimum):
        got = "no duration (a task count)" if duration is None else f"{duration:g} s"
        reasons.append(f"benchmark_duration_below_minimum: {got} configured, the minimum is {minimum:g} s")
    n, failed, overflow = finals
    limit = recipe.get("max_overflow_rate")
    if limit is not None and n and overflow / n > limit:
        reasons.append(f"context_overflow_rate_exceeded: {overflow} of {n} calls ({overflow / n:.1%} > {limit:.0%})")
    limit = recipe.get("max_error_rate")
    if limit is not None and n and failed / n > limit:
        reasons.append(f"failed_request_threshold_exceeded: {failed} of {n} calls failed ({failed / n:.1%} > "
                       f"{limit:.0%})")  # fmt: skip
    stop = str((footer or {}).get("stop_reason", "crashed"))
    if footer is None or (footer or {}).get("signal") or stop.startswith(("aborted", "interrupted", "crashed")):
        reasons.append(f"run_cancelled: {stop if footer else 'no footer'}")
    need = recipe.get("min_metric_coverage")
    long_enough = duration is not None and minimum is not None and duration >= minimum  # AIPerf checks those only
    if need is not None and long_enough and (share is None or share < need):
        got = "-" if share is None else f"{share:.1%}"
        reasons.append(f"insufficient_profile_metric_coverage: {got} of 1 s slices saw tokens (< {need:.0%})")
    if recipe.get("name") == "agentx":
        reasons += _locks(header, footer)
    corpus = _corpus(recipe, header)
    if corpus["matches"] is False:
        reasons.append(f"corpus_mismatch: the workload's fingerprint is {corpus['fingerprint'] or 'unknown'}, the run"
                       f" requires {corpus['required']}{_given(corpus.get('name'))}")  # fmt: skip
    return {"submission_valid": not reasons, "invalid_reasons": reasons, "metric_coverage": share, "corpus": corpus}


def _corpus(recipe: dict[str, Any], header: dict[str, Any]) -> dict[str, Any]:
    """The corpus the recipe pins (by name), the fingerprint the run requires, the workload's and whether they match
    (None when no fingerprint was required: then nothing was checked)."""
    pinned = recipe.get("corpus") or {}
    required = pinned.get("fingerprint")
    have = (header.get("workload") or {}).get("fingerprint")
    return {
        "name": pinned.get("name"),
        "required": required,
        "fingerprint": have,
        "matches": None if not required else have == required,
    }


def _given(name: str | None) -> str:
    """Where the required fingerprint came from: the user's option, never known to be the recipe's pinned corpus
    (replay does not ship that corpus and cannot know its fingerprint)."""
    pinned = f"; the recipe pins {name}, whose fingerprint replay cannot know" if name else ""
    return f" (given by --recipe-fingerprint{pinned})"


def _locks(header: dict[str, Any], footer: dict[str, Any] | None) -> list[str]:
    load, request = header.get("load") or {}, header.get("request") or {}
    out = []
    if load.get("tool_time") != "recorded":
        out.append(f"unsafe_override: --tool-time {load.get('tool_time')} (AgentX replays the recorded delays)")
    if not load.get("salt_tasks", True):
        out.append("unsafe_override: --no-salt-tasks (AgentX busts the cache per session tree)")
    if not request.get("force_output_length"):
        out.append("unsafe_override: output length not forced (AgentX sends ignore_eos)")
    lanes = (footer or {}).get("lanes") or {}
    if lanes and not lanes.get("warmup_passed", True):
        out.append("warmup_incomplete: the run stopped before the warm-up barrier")
    return out
