"""The run file's header: everything a report needs to know about how a run was made, and nothing secret."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import numpy
import orjson

from replay import __version__, event_loop
from replay.clients.host import HostConfig
from replay.records.run_file import RunWriter, clock_anchor
from replay.records.scrub import redact_fields
from replay.runner.recipes import get_recipe, header_block
from replay.workload.trajectory import Workload


def versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "numpy": numpy.__version__,
        "orjson": orjson.__version__,
        "platform": platform.platform(),
        "event_loop": event_loop.loop_factory()[0],
    }


def build_header(spec: Any, host: HostConfig, workload: Workload, sim: dict[str, Any] | None,
                 truth_log: Path | None) -> dict[str, Any]:  # fmt: skip
    """The header of a run of ``spec`` (a RunSpec) against ``host``; ``sim`` describes the embedded host, if any."""
    return {
        "replay_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "clock": {"name": "perf_counter", **clock_anchor()},
        "host": host.public(),
        "simulated_host": sim["profile"] if sim else None,
        "simulated": sim,
        "simulated_faults": sim["faults"] if sim else None,
        "simulated_truth_log": str(truth_log) if truth_log else None,
        "request": {
            "history": spec.history.public(),
            "force_output_length": spec.force_output_length,
            "check_answers": {None: "free", True: "all", False: "off"}[spec.check_answers],
            "keep_answers": spec.keep_answers or spec.history.output == "live",
            "cache_control": spec.cache_control,
            "responses_state": spec.responses_state,
            "extra_body": redact_fields(spec.extra_body),
        },
        "load": spec.load.public(),
        "thresholds": list(spec.thresholds),
        "slo": list(spec.slo),  # goodput's per-call SLO (replay report judges the file at it again)
        "abort_on_fail": spec.abort_on_fail,
        "window_s": spec.window_s,
        "scrape_metrics": spec.scrape_metrics,
        "baseline": {"file": spec.baseline, "tolerance": spec.baseline_tolerance} if spec.baseline else None,
        "history_gate": {"file": str(Path(spec.history_file).resolve())} if spec.history_file else None,
        "workload": {
            "paths": workload.paths,
            "digest": workload.digest,
            "fingerprint": workload.fingerprint,  # the corpus, whatever its files (workload/fingerprint.py)
            "trajectories": len(workload.trajectories),
            "turns": workload.turns,
            "tokenizer": workload.tokenizer,
            "unrecorded_context": workload.unrecorded_context,
            "padded_tokens": workload.padding.padded_tokens,  # Σ over one pass of the calls: stand-in tokens sent
            "padding": workload.padding.public(workload.unrecorded_context),
            "images": workload.images,
        },
        "versions": versions(),
    }


def resume_into(writer: RunWriter, previous: Any, header: dict[str, Any], truth_log: Path | None) -> None:
    """Go on writing a resumed run: a segment record says where this part begins."""
    writer.resumed(previous.header)
    writer.mark("segment", {"index": previous.segments, "created": header["created"], "clock": header["clock"],
                            "after": previous.stop_reason or "killed (no footer)", "elapsed_before_s":
                            previous.elapsed_s, "tasks_before": previous.tasks_started,
                            "simulated_truth_log": str(truth_log) if truth_log else None})  # fmt: skip


def recipe_header(spec: Any) -> dict[str, Any]:
    """The header's recipe entry (rules and host facts) and, for an open loop, its arrivals and cap."""
    recipe = get_recipe(spec.recipe) if spec.recipe else None
    out: dict[str, Any] = {"recipe": header_block(recipe, spec.recipe_facts)}
    if spec.arrivals is not None:
        out["open_loop"] = {"arrivals": str(spec.arrivals), "max_live": spec.max_live or spec.load.concurrency}
    return out
