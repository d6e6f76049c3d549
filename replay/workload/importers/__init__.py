"""Importers: recorded agent sessions and traces → canonical trajectories (``replay.trajectory/1``).

``IMPORTERS`` maps a format name to its import function (``path → list[Imported]``); ``detect_format``
names the format of a file from its content; ``import_paths`` imports files and directories (auto-detected
or forced), links Claude Code subagent transcripts to their parents and keeps trajectory ids unique;
``write_canonical`` writes the result as JSON Lines. See docs/importers.md.
"""

from __future__ import annotations

import gzip
import inspect as _inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from replay.workload.images import PLACEHOLDER
from replay.workload.importers import (
    atif,
    claude_code,
    exgentic,
    mini_swe_agent,
    mooncake,
    mooncake_agentic,
    openai_log,
    openhands,
    otel,
    rollouts,
    swe_agent,
    tracelab,
    weka,
)
from replay.workload.importers._delta import Imported
from replay.workload.importers._source import ImportFailure, Refused, read_json
from replay.workload.tokens import get_tokenizer
from replay.workload.trajectory import FORMAT_V1, MessageBuilder, TrajectoryError, parse_lines

IMPORTERS: dict[str, Callable[..., list[Imported]]] = {
    "swe-agent": swe_agent.import_file,
    "mini-swe-agent": mini_swe_agent.import_file,
    "openhands": openhands.import_file,
    "claude-code": claude_code.import_file,
    "openai-log": openai_log.import_file,
    "mooncake": mooncake.import_file,
    "weka": weka.import_file,
    "otel": otel.import_file,
    "mooncake-agentic": mooncake_agentic.import_file,
    "tracelab": tracelab.import_file,
    "hcua": mooncake_agentic.import_hcua,
    "atif": atif.import_file,
    "exgentic": exgentic.import_file,
    "rollout": rollouts.import_file,
}
ALIASES = {"rollouts": "rollout"}

CANONICAL = "canonical"

__all__ = [
    "CANONICAL",
    "IMPORTERS",
    "ImportFailure",
    "ImportResult",
    "Imported",
    "Refused",
    "detect_format",
    "expand",
    "import_files",
    "import_paths",
    "write_canonical",
]

_SUPPORTED = ", ".join(IMPORTERS)


def _first_line(path: Path) -> bytes:
    with path.open("rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rb") if gzipped else path.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                return raw
    return b""


def _detect_object(obj: Any) -> str | None:
    """Format of a parsed JSON document (whole file) or JSONL line; None if unknown."""
    if isinstance(obj, list):
        if obj and exgentic.looks_like(obj[0]):
            return "exgentic"
        if obj and isinstance(obj[0], dict) and "source" in obj[0] and ("action" in obj[0] or "observation" in obj[0]):
            return "openhands"
        if obj and isinstance(obj[0], dict) and "round_index" in obj[0] and "input_tokens_total" in obj[0]:
            return "tracelab"
        return "otel" if otel.looks_like(obj) else None
    if not isinstance(obj, dict):
        return None
    if obj.get("format") == FORMAT_V1:
        return CANONICAL
    if atif.looks_like(obj):
        return "atif"
    if rollouts.looks_like(obj):
        return "rollout"
    if exgentic.looks_like(obj):
        return "exgentic"
    if isinstance(obj.get("messages"), list) and "output_length" in obj:
        return "hcua" if _cua(obj["messages"]) else "mooncake-agentic"
    if "hash_ids" in obj and "input_length" in obj:
        return "mooncake"
    if "session_id" in obj and "round_index" in obj and "input_tokens_total" in obj:
        return "tracelab"
    if isinstance(obj.get("resourceSpans"), list) or otel.looks_like(obj):
        return "otel"
    if "block_size" in obj and "requests" in obj:
        return "weka"
    if str(obj.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return "mini-swe-agent"
    info = obj.get("info")
    if (
        isinstance(obj.get("messages"), list)
        and isinstance(info, dict)
        and ("mini_version" in info or "config" in info)
    ):
        return "mini-swe-agent"
    kind = obj.get("type")
    if kind in ("summary", "file-history-snapshot", "queue-operation") or (
        kind in ("user", "assistant", "progress", "system") and ("uuid" in obj or "sessionId" in obj)
    ):
        return "claude-code"
    history = obj.get("history")
    if isinstance(history, list) and history and isinstance(history[0], dict) and "source" in history[0]:
        return "openhands"
    if "trajectory" in obj or "attempts" in obj or (isinstance(history, list) and "info" in obj):
        return "swe-agent"
    if isinstance(history, list) and (not history or "role" in history[0]):
        return "swe-agent"
    for holder in (obj, obj.get("request"), obj.get("body")):
        if isinstance(holder, dict) and isinstance(holder.get("messages"), list):
            return "openai-log"
    return None


def _cua(messages: list[Any]) -> bool:
    """A computer-use agent's request: screenshots as image parts, or the placeholder its context cleaning left."""
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and (
                part.get("type") in ("image_url", "input_image", "image")
                or str(part.get("text", "")).strip() == PLACEHOLDER
            ):
                return True
    return False


def detect_format(path: str | Path) -> str:
    """The format of a file (a key of IMPORTERS, or "canonical"); Refused with the reason if none fits."""
    path = Path(path)
    if path.suffix in (".duckdb", ".parquet"):  # the only database and columnar files read: TraceLab's releases
        return "tracelab"
    first = _first_line(path)
    if not first:
        raise Refused(path, "", "empty file")
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        fmt = _detect_object(obj)
        line_formats = (
            CANONICAL,
            "mooncake",
            "claude-code",
            "openai-log",
            "mooncake-agentic",
            "hcua",
            "tracelab",
            "otel",
            "rollout",
            "exgentic",
        )
        if fmt in line_formats or (fmt == "openhands" and "history" in obj):
            return fmt
    try:
        whole = read_json(path)
    except ImportFailure:
        if obj is None:
            head = first[:40].decode("utf-8", "replace").strip()
            raise Refused(
                path, "", f"not JSON or JSON Lines (starts with {head!r}); expected one of: {_SUPPORTED}"
            ) from None
        whole = obj  # JSON Lines whose first object is of no known format
    fmt = _detect_object(whole)
    if fmt is None:
        keys = sorted(whole)[:8] if isinstance(whole, dict) else type(whole).__name__
        raise Refused(
            path, "", f"JSON of no known trajectory format (top level: {keys}); expected one of: {_SUPPORTED}"
        )
    return fmt


def _canonical(path: Path) -> list[Imported]:
    """Pass a canonical file through, validated by the loader's own rules first (TrajectoryError names the line)."""
    data = path.read_bytes()
    builder = MessageBuilder(get_tokenizer())
    for _ in parse_lines(str(path), data.splitlines(), builder):
        pass
    out: list[Imported] = []
    for raw in data.splitlines():
        if not raw.strip():
            continue
        obj = orjson.loads(raw)
        if isinstance(obj, dict) and "format" in obj:
            out.append(Imported(header=obj, turns=[]))
        elif out:
            out[-1].turns.append(obj)
    return out


@dataclass
class FileReport:
    path: str
    format: str
    trajectories: int
    turns: int


@dataclass
class ImportResult:
    trajectories: list[Imported] = field(default_factory=list)
    files: list[FileReport] = field(default_factory=list)
    refused: list[tuple[str, str, bool]] = field(default_factory=list)  # (path, reason, named explicitly)


def expand(paths: Iterable[str | Path]) -> list[tuple[Path, bool]]:
    out: list[tuple[Path, bool]] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(
                (f, False)
                for f in sorted(p.rglob("*"))
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        elif p.is_file():
            out.append((p, True))
        elif p.exists():  # a FIFO would hang the read, /dev/zero fill the memory with one endless line
            raise ImportFailure(p, "", "not a regular file (a pipe or a device): trajectories are read from files")
        else:
            raise ImportFailure(p, "", "no such file or directory")
    return out


def _call(fn: Callable[..., list[Imported]], path: Path, options: dict[str, Any]) -> list[Imported]:
    params = _inspect.signature(fn).parameters
    return fn(path, **{k: v for k, v in options.items() if k in params and v is not None})


def _rename(group: list[Imported], taken: set[str]) -> None:
    """Give a group (a trajectory and its subagents) unique ids, keeping spawn references intact."""
    root = group[0].id
    if not any(t.id in taken for t in group):
        return
    n = 2
    while any(t.id.replace(root, f"{root}~{n}", 1) in taken for t in group):
        n += 1
    mapping = {t.id: t.id.replace(root, f"{root}~{n}", 1) for t in group}
    for t in group:
        t.header["id"] = mapping[t.id]
        for turn in t.turns:
            for s in turn.get("spawn") or ():
                s["trajectory"] = mapping.get(s["trajectory"], s["trajectory"])


def import_paths(
    paths: Iterable[str | Path],
    fmt: str = "auto",
    *,
    salt: str | None = None,
    block_size: int | None = None,
    include_discarded: bool = False,
    screenshot_window: int | None = None,
) -> ImportResult:
    """Import files and directories (their files, recursively). Refused files are listed, with whether they
    were named explicitly; malformed input raises ImportFailure naming the file, line or JSON path.
    ``include_discarded``: replay the calls a source threw away (mini-swe-agent format errors) too;
    ``screenshot_window``: keep each request's last N images (the formats with images: hcua, mooncake-agentic)."""
    return import_files(
        expand(paths),
        fmt,
        salt=salt,
        block_size=block_size,
        include_discarded=include_discarded,
        screenshot_window=screenshot_window,
    )


def import_files(
    files: list[tuple[Path, bool]],
    fmt: str = "auto",
    *,
    salt: str | None = None,
    block_size: int | None = None,
    include_discarded: bool = False,
    screenshot_window: int | None = None,
) -> ImportResult:
    """Import (path, named explicitly) pairs; see import_paths."""
    fmt = ALIASES.get(fmt, fmt)
    if fmt != "auto" and fmt not in IMPORTERS:
        raise ValueError(f"unknown format {fmt!r}; expected auto or one of: {_SUPPORTED}")
    options = {
        "salt": salt,
        "block_size": block_size,
        "include_discarded": include_discarded or None,
        "screenshot_window": screenshot_window,
    }
    result = ImportResult()
    detected: list[tuple[Path, str, bool]] = []
    for path, explicit in files:
        try:
            detected.append((path, fmt if fmt != "auto" else detect_format(path), explicit))
        except Refused as exc:
            result.refused.append((str(path), exc.problem, explicit))
    pool = {aid: p for p, f, _ in detected if f == "claude-code" and (aid := claude_code.agent_id_of(p)) is not None}
    groups: list[tuple[Path, str, list[Imported]]] = []
    for path, f, explicit in detected:
        try:
            if f == CANONICAL:
                group = _canonical(path)
            elif f == "claude-code":
                group = claude_code.import_file(path, pool=pool)
            else:
                group = _call(IMPORTERS[f], path, options)
        except Refused as exc:
            result.refused.append((str(path), exc.problem, explicit))
            continue
        except (ImportFailure, TrajectoryError):
            raise
        except ValueError as exc:  # a source that makes no valid trajectory (e.g. a call with no input)
            raise ImportFailure(path, "", str(exc)) from None
        if not group:
            result.refused.append((str(path), "no trajectories in file", explicit))
            continue
        groups.append((path, f, group))
    # A subagent transcript imported with its parent is not also a trajectory of its own.
    claimed = {
        str(Path(t.header.get("source", {}).get("path", "")).resolve())
        for _, f, g in groups
        if f == "claude-code"
        for t in g
        if t.header.get("subagent")
    }
    # So is an ATIF document imported through the parent that refers to it.
    claimed_atif = {t.header["source"].get(atif.SUBAGENT_FILE) for _, f, g in groups if f == "atif" for t in g}
    taken: set[str] = set()
    for path, f, group in groups:
        source = group[0].header.get("source", {})
        if f == "claude-code" and str(path.resolve()) in claimed and source.get("sidechain"):
            continue
        if f == "atif" and str(path.resolve()) in claimed_atif:
            continue
        _rename(group, taken)
        taken.update(t.id for t in group)
        result.trajectories.extend(group)
        result.files.append(FileReport(str(path), f, len(group), sum(len(t.turns) for t in group)))
    return result


def write_canonical(trajectories: Iterable[Imported], out: IO[bytes]) -> None:
    """Write trajectories as canonical JSON Lines."""
    for t in trajectories:
        for line in t.lines():
            out.write(line)
            out.write(b"\n")
