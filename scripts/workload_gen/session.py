"""One agent session: play the plan turn by turn, sizing each observation to the context budget."""

from __future__ import annotations

from replay.workload.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS
from workload_gen.data import text
from workload_gen.outputs import code_block, observation
from workload_gen.plan import EDITS, FIXED_EST, FLEX, PY_RUNS, QUICK, TEST_RUNS
from workload_gen.session_base import Turn
from workload_gen.steps_explore import ExploreSteps
from workload_gen.steps_fix import FixSteps
from workload_gen.steps_review import ReviewSteps
from workload_gen.steps_tests import TestSteps

FORMAT = "replay.trajectory/1"
GENERATOR = "scripts/make_default_workload.py"
SYSTEM_PROMPT = text("system_prompt.md")
TASK_TEMPLATE = text("task.md")


class Session(ExploreSteps, FixSteps, TestSteps, ReviewSteps):
    """Plays one agent session against a virtual repository, sizing observations to a context budget."""

    # ---- the loop -------------------------------------------------------------------------------------
    def run(self) -> tuple[dict[str, object], list[Turn]]:
        """Play the plan turn by turn, tracking the exact context size so each observation can be sized."""
        p = self.p
        task = TASK_TEMPLATE.format(title=p.title, issue=p.issue, org=p.org, name=p.name, commit=self.commit)
        context: list[int] = []  # per-message tokens including framing
        pending = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
        turns: list[Turn] = []
        n = len(self.plan)
        comp = self.plan.index("reorient") if "reorient" in self.plan else None
        note = ""
        for i, kind in enumerate(self.plan):
            truncate = None
            if kind == "reorient":
                truncate = 2
                context = context[:2]
                pending = [{"role": "user", "content": self.summary()}]
                note = ""
            context += [self.count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in pending]
            prompt = sum(context) + REPLY_PRIMING_TOKENS
            seg_end = comp - 1 if comp is not None and i < comp else n - 1
            target = self.shape.peak_tokens if comp is None or i < comp else int(self.shape.peak_tokens * 0.5)
            budget = self.budget(i, seg_end, prompt, target)
            step = getattr(self, f"step_{kind}")(budget)
            thought = step.thought if step.reacts or not note else f"{note} {step.thought}"
            thought = self.maybe_plan_sentence(thought, kind)
            content = code_block(thought, step.command)
            out_tokens = max(1, self.count(content))
            turns.append(Turn(pending, content, out_tokens, 0.0, truncate, prompt))
            context.append(out_tokens + MESSAGE_OVERHEAD_TOKENS)
            pending = [{"role": "user", "content": observation(step.output, step.rc)}]
            note = step.note
        self.assign_tool_times(turns)
        header = {
            "format": FORMAT,
            "id": f"default/{p.name}-{p.slug}",
            "model": "synthetic",
            "source": {"generator": GENERATOR, "seed": self.seed},
        }
        return header, turns

    def budget(self, i: int, seg_end: int, prompt: int, target: int) -> int:
        """Tokens for this step's observation so that the segment ends near ``target`` tokens."""
        kind = self.plan[i]
        if kind not in FLEX or i >= seg_end:
            return FIXED_EST.get(kind, 300)
        rest = self.plan[i:seg_end]  # observations still to come in this segment
        fixed = sum(FIXED_EST.get(k, 300) for k in rest if k not in FLEX)
        room = target - prompt - 135 * (seg_end + 1 - i) - fixed
        flex = [FLEX[k] for k in rest if k in FLEX]
        # water-filling: find the level at which the capped shares of the remaining flexible steps fill the room
        low, high = 0.0, 100_000.0
        for _ in range(40):
            level = (low + high) / 2
            if sum(max(lo, min(hi, w * level)) for w, lo, hi in flex) > room:
                high = level
            else:
                low = level
        weight, lo, hi = FLEX[kind]
        return max(lo, min(hi, int(weight * low * self.rng.uniform(0.9, 1.1))))

    def assign_tool_times(self, turns: list[Turn]) -> None:
        """Realistic per-command durations, with test runs scaled so a session totals 20-60 s."""
        rng = self.rng
        times: list[float] = []
        for kind in self.plan:
            if kind == "submit":
                times.append(0.0)
            elif kind in QUICK:
                times.append(min(1.5, max(0.05, rng.lognormvariate(-1.5, 0.6))))
            elif kind in EDITS:
                times.append(rng.uniform(0.1, 0.5))
            elif kind in PY_RUNS:
                times.append(rng.uniform(0.3, 1.4))
            elif kind == "pip_install":
                times.append(rng.uniform(5.0, 20.0))
            elif kind in ("pytest_full", "pytest_full_unrelated"):
                times.append(rng.uniform(9.0, 22.0))
            else:
                times.append(rng.uniform(3.0, 9.0))
        goal = rng.uniform(22.0, 55.0)
        heavy = [j for j, k in enumerate(self.plan) if k in TEST_RUNS]
        light = sum(t for j, t in enumerate(times) if j not in heavy)
        heavy_sum = sum(times[j] for j in heavy)
        if heavy and heavy_sum:
            scale = max(0.3, (goal - light) / heavy_sum)
            for j in heavy:
                t = times[j] * scale
                # clamp into the range real test runs take, without piling values up on the bounds
                times[j] = rng.uniform(3.0, 4.5) if t < 3.0 else rng.uniform(21.0, 25.0) if t > 25.0 else t
        for turn, t in zip(turns, times, strict=True):
            turn.tool_time_s = round(t, 3)
