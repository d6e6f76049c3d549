"""Synthetic trajectories from a profile of distributions, and profiles fitted to recorded trajectories.

A *profile* (``replay.profile/1``, JSON) holds, per quantity, an empirical distribution as quantiles at
evenly spaced probabilities (21 by default: 0, 5, ..., 100 %). Sampling is inverse-CDF with linear
interpolation between quantiles, from a seeded ``numpy.random.Generator``, so a profile and a seed give
byte-identical output. Quantities (token counts are the loader's: cl100k content + 4 per message + 3):

- ``turns``: model calls per task trajectory;
- ``first_prompt_tokens``: ``prompt_tokens_est`` of a task's first call (system prompt + task);
- ``growth_tokens``: how much a later call's prompt exceeds the previous one's (the previous answer as it
  stays in the context, plus what the call appends: the observation); the appended message gets the rest;
- ``output_tokens``: the recorded output length (sent as ``max_tokens``);
- ``answer_tokens``: the part of the output that stays in the context (content; the rest of
  ``output_tokens`` is reasoning, which the default history policy does not send back);
- ``tool_time_s``: the pause after a call (the last call of a trajectory has none);
- ``compaction``: probability per later turn that the context is compacted (``truncate_to`` 2: system and
  task kept, plus a summary) and the fraction of the context the compacted request keeps;
- ``subagents``: probability per turn of spawning a fresh subagent, and its turns and first-call size.

Quantities are sampled independently (per trajectory or per turn): correlations of the source (long
trajectories with large observations) are not kept. Text comes from :mod:`replay.workload.importers._blocks`: one
cl100k token per word, so every message has exactly the sampled size, and it is drawn per trajectory id
and seed, so different trajectories never share text except the system prompt (shared by all, as one
agent's would be).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from replay.errors import ReplayError
from replay.histogram import percentile, percentiles
from replay.workload.importers._blocks import BlockText
from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS
from replay.workload.trajectory import FORMAT_V1, Trajectory

PROFILE_FORMAT = "replay.profile/1"
QUANTILES = 21
KNOT_SCALE = 10_000  # values held to 4 decimals (as the profile writes them), then the histogram's 3 digits
DISTRIBUTIONS = (
    "turns",
    "first_prompt_tokens",
    "growth_tokens",
    "output_tokens",
    "answer_tokens",
    "tool_time_s",
)
# A first call holds a system and a user message of at least one token each.
MIN_FIRST_PROMPT = REPLY_PRIMING_TOKENS + 2 * (MESSAGE_OVERHEAD_TOKENS + 1)


class ProfileError(ReplayError, ValueError):
    """A profile that cannot be read or used."""


# ---------------------------------------------------------------------------------------------- fitting


def _quantiles(values: Iterable[float], n: int = QUANTILES) -> list[float] | None:
    """``n`` evenly spaced quantiles, min to max, by the one percentile method (``replay.histogram``)."""
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return None
    got = percentiles(data, [100 * q for q in np.linspace(0.0, 1.0, n)], KNOT_SCALE)
    return [round(float(q or 0.0), 4) for q in got.values()]


def _median(values: Iterable[float]) -> float:
    return percentile(list(values), 50, KNOT_SCALE) or 0.0


def growth(traj: Trajectory) -> list[int]:
    """Prompt-size increase from each call to the next, over the later calls that do not compact."""
    return [
        cur.prompt_tokens_est - prev.prompt_tokens_est
        for prev, cur in itertools.pairwise(traj.turns)
        if cur.truncate_to is None
    ]


def figures(trajectories: list[Trajectory]) -> dict[str, Any]:
    """What ``--like`` promises to reproduce: median turns, first call and growth, pooled prefix reuse."""
    tasks = [t for t in trajectories if not t.subagent] or trajectories
    turns = [t for tr in trajectories for t in tr.turns]
    prompt = sum(t.prompt_tokens_est for t in turns)
    return {
        "trajectories": len(tasks),
        "turns": len(turns),
        "turns_median": _median(len(t.turns) for t in tasks),
        "first_prompt_tokens_median": _median(t.turns[0].prompt_tokens_est for t in tasks),
        "growth_median": _median(g for t in trajectories for g in growth(t) or [0]),
        "prefix_reuse_pooled": round(sum(t.reusable_prefix_tokens for t in turns) / prompt, 4) if prompt else 0.0,
    }


def fit(trajectories: list[Trajectory], name: str = "fitted", quantiles: int = QUANTILES) -> dict[str, Any]:
    """A profile of the trajectories' distributions (numbers only: no text of the source is kept)."""
    if not trajectories:
        raise ProfileError("no trajectories to fit")
    tasks = [t for t in trajectories if not t.subagent] or trajectories
    subs = [t for t in trajectories if t.subagent]
    turns = [t for tr in trajectories for t in tr.turns]
    later = [(prev, cur) for tr in trajectories for prev, cur in itertools.pairwise(tr.turns)]
    kept = [
        cur.prompt_tokens_est / (prev.prompt_tokens_est + prev.output_message.tokens)
        for prev, cur in later
        if cur.truncate_to is not None
    ]
    firsts = [t.turns[0].append[0] for t in tasks if t.turns[0].append]
    systems = [m.tokens for m in firsts if m.role == "system"]
    spawns = sum(len(t.spawn) for t in turns)

    def q(values: Iterable[float]) -> list[float] | None:
        return _quantiles(values, quantiles)

    return {
        "format": PROFILE_FORMAT,
        "name": name,
        "quantiles": quantiles,
        "system_prompt_tokens": int(_median(systems)) if systems else 0,
        "distributions": {
            "turns": q(len(t.turns) for t in tasks),
            "first_prompt_tokens": q(t.turns[0].prompt_tokens_est for t in tasks),
            "growth_tokens": q(g for t in trajectories for g in growth(t)) or [float(MESSAGE_OVERHEAD_TOKENS + 1)] * 2,
            "output_tokens": q(t.output_tokens for t in turns),
            "answer_tokens": q(t.output_message.tokens - MESSAGE_OVERHEAD_TOKENS for t in turns),
            "tool_time_s": q(t.tool_time_s for tr in trajectories for t in tr.turns[:-1]) or [0.0, 0.0],
        },
        "compaction": {
            "probability": round(len(kept) / len(later), 6) if later else 0.0,
            "kept_fraction": q(kept),
        },
        "subagents": {
            "spawn_probability": round(spawns / len(turns), 6),
            "turns": q(len(t.turns) for t in subs),
            "first_prompt_tokens": q(t.turns[0].prompt_tokens_est for t in subs),
        },
        "fitted_from": figures(trajectories),
    }


# ---------------------------------------------------------------------------------------------- profiles


def profiles_dir() -> Path:
    """Where the shipped profiles live (``trajectories/profiles`` of the checkout)."""
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout / "trajectories", Path(sys.prefix) / "share" / "replay" / "trajectories"):
        if (candidate / "profiles").is_dir():
            return candidate / "profiles"
    return checkout / "trajectories" / "profiles"


def load_profile(name_or_path: str | Path) -> dict[str, Any]:
    """A profile by path, or by name among the shipped ones (``coding-agent``); validated."""
    path = Path(name_or_path)
    if not path.exists():
        path = profiles_dir() / f"{name_or_path}.json"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in profiles_dir().glob("*.json"))) or "none"
        raise ProfileError(f"{name_or_path}: no such profile file or shipped profile (shipped: {known})")
    try:
        profile = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not valid JSON ({exc})") from None
    check_profile(profile, str(path))
    return profile


def check_profile(profile: Any, where: str = "profile") -> None:
    """Raise ProfileError naming the first field that is missing or not a usable distribution."""

    def quantile_list(value: Any, name: str, optional: bool = False) -> None:
        if value is None and optional:
            return
        ok = isinstance(value, list) and len(value) >= 2 and all(isinstance(v, (int, float)) for v in value)
        if not ok or any(b < a for a, b in itertools.pairwise(value)):
            raise ProfileError(f"{where}: field '{name}': expected a non-decreasing list of at least 2 numbers")

    if not isinstance(profile, dict) or profile.get("format") != PROFILE_FORMAT:
        raise ProfileError(f"{where}: field 'format': expected {PROFILE_FORMAT!r}")
    dists = profile.get("distributions")
    if not isinstance(dists, dict):
        raise ProfileError(f"{where}: field 'distributions': expected an object")
    for key in DISTRIBUTIONS:
        quantile_list(dists.get(key), f"distributions.{key}")
    comp, subs = profile.get("compaction") or {}, profile.get("subagents") or {}
    for name, p in (("compaction.probability", comp.get("probability", 0.0)),
                    ("subagents.spawn_probability", subs.get("spawn_probability", 0.0))):  # fmt: skip
        if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ProfileError(f"{where}: field '{name}': expected a probability in [0, 1]")
    quantile_list(comp.get("kept_fraction"), "compaction.kept_fraction", optional=True)
    quantile_list(subs.get("turns"), "subagents.turns", optional=True)
    quantile_list(subs.get("first_prompt_tokens"), "subagents.first_prompt_tokens", optional=True)


# ---------------------------------------------------------------------------------------------- synthesis


@dataclass
class _Sampler:
    rng: np.random.Generator

    def draw(self, quantiles: list[float]) -> float:
        probs = np.linspace(0.0, 1.0, len(quantiles))
        return float(np.interp(self.rng.random(), probs, quantiles))

    def count(self, quantiles: list[float], low: int = 1) -> int:
        return max(low, round(self.draw(quantiles)))

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p


class Synthesizer:
    """Draws trajectories from a profile; ``rows()`` gives the canonical JSON Lines objects."""

    def __init__(self, profile: dict[str, Any], seed: int = 0) -> None:
        check_profile(profile)
        self.profile, self.seed = profile, seed
        self.name = str(profile.get("name") or "profile")
        self.d = profile["distributions"]
        self.comp = profile.get("compaction") or {}
        self.subs = profile.get("subagents") or {}
        self.s = _Sampler(np.random.default_rng(seed))
        self.text = BlockText(salt=f"replay-synth\x00{seed}")
        self.system_tokens = int(profile.get("system_prompt_tokens") or 0)

    def _first(self, key: str, first_prompt: int) -> list[dict[str, Any]]:
        """System prompt (a prefix of the shared one) and task, summing to ``first_prompt`` tokens."""
        room = max(MIN_FIRST_PROMPT, first_prompt) - REPLY_PRIMING_TOKENS - 2 * MESSAGE_OVERHEAD_TOKENS
        system = max(1, min(self.system_tokens, room - 1))
        return [
            {"role": "system", "content": self.text.block("system", system, max(self.system_tokens, system))},
            {"role": "user", "content": self.text.filler(f"{key}\x00task", room - system)},
        ]

    def _output(self, key: str, cap: int | None) -> tuple[dict[str, Any], int, int]:
        """The answer; ``cap``: at most this many tokens stay in the context (the next call's growth)."""
        visible = self.s.count(self.d["answer_tokens"])
        if cap is not None:
            visible = max(1, min(visible, cap))
        total = max(visible, self.s.count(self.d["output_tokens"]))
        output: dict[str, Any] = {"content": self.text.filler(f"{key}\x00out", visible)}
        if total > visible:
            output["reasoning"] = self.text.filler(f"{key}\x00reasoning", total - visible)
        return output, total, visible + MESSAGE_OVERHEAD_TOKENS

    def trajectory(self, traj_id: str, subagent: bool = False) -> list[dict[str, Any]]:
        """Header and turns of one trajectory, then those of the subagents it spawns."""
        sub_turns = self.subs.get("turns") if subagent else None
        sub_first = self.subs.get("first_prompt_tokens") if subagent else None
        n_turns = self.s.count(sub_turns or self.d["turns"])
        first = self.s.count(sub_first or self.d["first_prompt_tokens"], MIN_FIRST_PROMPT)
        header: dict[str, Any] = {
            "format": FORMAT_V1,
            "id": traj_id,
            "model": "synthetic",
            "source": {"generator": "replay synth", "profile": self.name, "seed": self.seed},
        }
        if subagent:
            header["subagent"] = True
        rows, children = [header], list[str]()
        context = 0  # prompt tokens of the context before the next call's append (reply priming excluded)
        answer = 0  # tokens the previous answer adds to the context
        base = 0  # tokens of the first two messages (what compaction keeps)
        # Later calls: compacted (None) or the growth of their prompt, drawn first so that the answer before
        # a call never outgrows it (the previous answer is part of a call's growth).
        compact_p = self.comp.get("probability", 0.0) if self.comp.get("kept_fraction") else 0.0
        grows: list[int | None] = [0]
        grows.extend(
            None if self.s.chance(compact_p) else self.s.count(self.d["growth_tokens"], 2 * MESSAGE_OVERHEAD_TOKENS + 2)
            for _ in range(n_turns - 1)
        )
        for k in range(n_turns):
            key = f"{traj_id}\x00{k}"
            turn: dict[str, Any] = {}
            if k == 0:
                turn["append"] = self._first(traj_id, first)
                base = context = first - REPLY_PRIMING_TOKENS
            elif (grow := grows[k]) is None:
                target = round(self.s.draw(self.comp["kept_fraction"]) * (context + REPLY_PRIMING_TOKENS))
                summary = max(1, target - REPLY_PRIMING_TOKENS - base - MESSAGE_OVERHEAD_TOKENS)
                turn["truncate_to"] = 2
                turn["append"] = [{"role": "user", "content": self.text.filler(f"{key}\x00summary", summary)}]
                context = base + summary + MESSAGE_OVERHEAD_TOKENS
            else:
                size = grow - answer
                content = self.text.filler(f"{key}\x00obs", size - MESSAGE_OVERHEAD_TOKENS)
                turn["append"] = [{"role": "user", "content": content}]
                context += size
            nxt = grows[k + 1] if k + 1 < n_turns else None
            output, total, answer = self._output(key, None if nxt is None else nxt - 2 * MESSAGE_OVERHEAD_TOKENS - 1)
            context += answer
            last = k == n_turns - 1
            turn["output"] = output
            turn["output_tokens"] = total
            turn["tool_time_s"] = 0.0 if last else round(self.s.draw(self.d["tool_time_s"]), 3)
            if not last and not subagent and self.s.chance(self.subs.get("spawn_probability", 0.0)):
                child = f"{traj_id}/sub{len(children)}"
                turn["spawn"] = [{"trajectory": child, "fork": False}]
                children.append(child)
            rows.append(turn)
        for child in children:
            rows.extend(self.trajectory(child, subagent=True))
        return rows

    def rows(self, n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in range(n):
            out.extend(self.trajectory(f"synth/{self.name}/s{self.seed}/{i:05d}"))
        return out


def write(rows: list[dict[str, Any]], fh: IO[bytes]) -> None:
    for row in rows:
        fh.write(orjson.dumps(row) + b"\n")


def synthesize(profile: dict[str, Any], n: int, seed: int = 0) -> bytes:
    """Canonical JSON Lines of ``n`` task trajectories (plus the subagents they spawn)."""
    return b"".join(orjson.dumps(row) + b"\n" for row in Synthesizer(profile, seed).rows(n))


__all__ = [
    "PROFILE_FORMAT",
    "ProfileError",
    "Synthesizer",
    "check_profile",
    "figures",
    "fit",
    "growth",
    "load_profile",
    "profiles_dir",
    "synthesize",
    "write",
]
