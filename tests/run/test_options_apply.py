"""No silent options (issue 24): every option of run, sweep, capacity and claims verify, in a mode where it does
nothing, is refused with exit code 1 and a line naming it; in a mode where it applies, it is taken.

``--sim-faults`` against a URL host, ``--slo-tier`` without its recipe and ``--max-live`` without ``--arrivals`` used
to be accepted and ignored. The table below names every option of the
four commands, either with the modes where it does nothing and where it applies, or with why it applies in every
mode; a new option missing from it fails ``test_every_option_is_in_the_table``. The runs given are stopped before
any host starts by a workload file that does not exist: an option error comes before it, so the error line says
which one stopped the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from replay.cli import main
from tests.support.paths import ROOT

MISSING = "no-such-workload.jsonl"
CLAIMS = str(ROOT / "docs" / "claims-example.toml")
URL = ["--host", "http://127.0.0.1:9/v1", "--model", "m"]
TWO = ["--host", "sim:fast", "--host", "sim:default"]
HTTPS = ["--host", "https://127.0.0.1:9/v1", "--model", "m"]
V = ["--virtual"]


def base(command: str, tmp: Path) -> list[str]:
    return {
        "run": ["run", MISSING, "-q", "--out", str(tmp / "run.jsonl")],
        "sweep": ["sweep", MISSING, "-q", "--out", str(tmp / "sweep")],
        "capacity": ["capacity", MISSING, "--slo", "ttft_p95<=2s", "-q", "--out", str(tmp / "capacity")],
        "claims": ["claims", "verify", CLAIMS, MISSING, "-q"],
    }[command]


RUN, STUDIES, ALL = ("run",), ("sweep", "capacity", "claims"), ("run", "sweep", "capacity", "claims")
RUN_SWEEP = ("run", "sweep")  # the recipe's options: a sweep's levels can be recipe runs

# (commands, the option as given, modes where it does nothing, modes where it applies)
REFUSED: list[tuple[tuple[str, ...], list[str], list[list[str]], list[list[str]]]] = [
    (ALL, ["--sim-profile", "fast"], [URL, ["--host", "sim:default"]], [[]]),
    (ALL, ["--sim-profile-file", "p.toml"], [URL], [[]]),
    (ALL, ["--sim-faults", "429:0.1"], [URL], [[]]),
    (STUDIES, ["--sim-faults", "429:0.1"], [V], [[]]),
    (ALL, ["--sim-dialect", "groq"], [URL], [[]]),
    (STUDIES, ["--sim-dialect", "groq"], [V], [[]]),
    (ALL, ["--sim-fallback", "0.3:overloaded"], [URL], [[]]),
    (ALL, ["--sim-fault-seed", "3"], [[], URL], [["--sim-faults", "429:0.1"], ["--sim-fallback", "0.3:overloaded"]]),
    (RUN, ["--sim-truth-log", "t.jsonl"], [URL, TWO], [[]]),
    (STUDIES, ["--sim-truth-log", "t.jsonl"], [[], V], []),
    (ALL, ["--hosts", "replay.toml"], [URL, []], [["--host", "groq"]]),
    (ALL, ["--retry-max-wait", "5"], [[]], [["--retries", "2"], URL]),
    (ALL, ["--retry-partial"], [[], ["--retries", "0", *URL]], [["--retries", "2"]]),
    (("run", "sweep"), ["--hosts-at-once"], [[]], [TWO]),
    (RUN, ["--max-live", "3"], [[]], [["--arrivals", "poisson:1"]]),
    (RUN, ["-c", "4"], [["--arrivals", "poisson:1", "--max-live", "3"]], [[], ["--arrivals", "poisson:1"]]),
    (RUN_SWEEP, ["--slo-tier", "a:1:2"], [[], ["--recipe", "agentx"]], [["--recipe", "aa-agentperf"]]),
    (RUN_SWEEP, ["--recipe-min-duration", "10"], [[], ["--recipe", "aa-agentperf"]], [["--recipe", "agentx"]]),
    (
        RUN_SWEEP,
        ["--recipe-fingerprint", "sha256:" + "0" * 64],
        [[]],
        [["--recipe", "agentx"], ["--recipe", "aa-agentperf"]],
    ),
    (RUN_SWEEP, ["--warmup", "5s"], [["--recipe", "agentx"]], [[], ["--recipe", "aa-agentperf"]]),
    (RUN, ["--idle-cap", "5"], [["--tool-time", "none"]], [[]]),
    (RUN, ["--ramp-up", "2"], [["--arrivals", "poisson:1"]], [[]]),
    (RUN, ["--ray-listen", "127.0.0.1"], [[]], [["--ray", "auto"]]),
    (RUN, ["--baseline-tolerance", "20%"], [[]], [["--baseline", CLAIMS]]),
    (RUN, ["--abort-on-fail"], [[]], [["--threshold", "ttft_p95<2s"]]),
    (("capacity",), ["--repeats", "2"], [V], [[]]),
    (ALL, ["--cache-control", "auto"], [[]], [["--api", "anthropic"]]),
    (ALL, ["--responses-state", "previous"], [[]], [["--api", "responses"]]),
    (ALL, ["--speed", "fast"], [["--dialect", "groq", *URL]], [["--dialect", "anthropic", *URL], URL]),
    (ALL, ["--route-sort", "price"], [URL], [["--dialect", "openrouter", *URL]]),
    (ALL, ["--route-order", "a,b"], [URL], [["--dialect", "openrouter", *URL]]),
    (ALL, ["--route-only", "a"], [URL], [["--dialect", "openrouter", *URL]]),
    (ALL, ["--no-fallbacks"], [URL], [["--dialect", "openrouter", *URL]]),
    (ALL, ["--ca-bundle", "c.pem"], [[], URL], [HTTPS]),
    (ALL, ["--insecure"], [[], URL], [HTTPS]),
    (STUDIES, ["--insecure"], [V], []),
    (ALL, ["--transport", "websocket"], [[]], [["--api", "responses"]]),
    (STUDIES, ["--transport", "websocket"], [V], []),
]
# The options a request carries, which the virtual clock never sends (each applies in a real-time study).
for given in (["--dialect", "groq"], ["--model", "m"], ["--api", "completions"], ["--api-key-env", "K"],
              ["--request-timeout", "30"], ["--stall-timeout", "30"], ["--max-response-bytes", "1MiB"],
              ["--force-output-length"], ["--extra-body", "{}"], ["--header", "X-A:1"],
              ["--connection", "per-request"], ["--service-tier", "flex"], ["--rate-card", "input=1,output=2"],
              ["--max-rpm", "60"], ["--drain-timeout", "5"], ["--history", "live"], ["--retries", "2"],
              ["--on-error", "end-task"], ["--check-answers"], ["--follow-redirects"]):  # fmt: skip
    REFUSED.append((STUDIES, given, [V], [[]]))

# Options that apply in every mode of the command, and why.
ALWAYS = {
    "trajectories": "the workload",
    "claims_file": "the claims",
    "hosts": "the host(s)",
    "levels": "the study's levels",
    "workers": "processes (refused with what needs one: --resume, --arrivals, --max-rpm, lanes)",
    "ray": "Ray actors (refused with what needs one process, as --workers)",
    "duration": "the stop",
    "tasks": "the stop",
    "warmup": "the steady window's start",
    "window": "windows, or a study's steady window",
    "tool_time": "the pauses (the virtual clock takes recorded, scale and none)",
    "salt_tasks": "distinct tasks (the virtual clock's unique_tasks)",
    "seed": "the task order",
    "recipe": "the recipe (a run's, or each level's of a sweep)",
    "start_at": "the start point (refused with --arrivals)",
    "arrivals": "the open loop",
    "thresholds": "the verdict",
    "prometheus": "the live figures",
    "scrape_metrics": "the host's /metrics (the simulated host has one)",
    "baseline": "the gate",
    "history_file": "the gate on the nights before (and tonight kept)",
    "tokenizer": "the workload's counts",
    "unrecorded_context": "the workload's context (padded or left out)",
    "ramp_up": "the lanes' starts (a study's levels are closed loops; refused with --arrivals)",
    "frontier_x": "the sweep frontier's speed axis",
    "reasoning_history": "the rendered prompts (the virtual clock counts them too)",
    "tool_calls": "the rendered prompts (the virtual clock counts them too)",
    "gpus": "per-GPU figures (default: the simulated profile's)",
    "power_kw": "per-MW figures",
    "price_per_hour": "the hourly cost",
    "resume": "the run to go on with",
    "out": "where the run files go",
    "as_json": "the output",
    "html_path": "the page",
    "csv_dir": "the CSV",
    "quiet": "the progress lines",
    "virtual": "the virtual clock",
    "knee": "the knee's rule",
    "slo": "the SLO",
    "tiers": "the SLO tiers (instead of --slo)",
    "limit": "the search",
    "start": "the search",
    "grow": "the search",
    "repeats": "the search (real time)",
    # what a request carries, and how failures are handled: every run sends requests (refused on the virtual clock)
    **dict.fromkeys(
        (
            "dialect",
            "model",
            "api",
            "api_key_env",
            "request_timeout",
            "stall_timeout",
            "max_response_bytes",
            "force_output_length",
            "extra_body",
            "headers",
            "connection",
            "service_tier",
            "rate_card",
            "check_answers",
            "follow_redirects",
            "source_addresses",
            "max_rpm",
            "drain_timeout",
            "history",
            "retries",
            "on_error",
        ),
        "the requests",
    ),
    # judged with the run's spec (their values, not whether they were given) in the table above:
    "cache_control": "",
    "responses_state": "",
    "speed": "",
    "route_sort": "",
    "route_order": "",
    "route_only": "",
    "no_fallbacks": "",
}


def _command(name: str):
    return main.commands["claims"].commands["verify"] if name == "claims" else main.commands[name]


def _invoke(args: list[str]):
    res = CliRunner().invoke(main, args)
    lines = [line for line in res.output.splitlines() if line.startswith("Error")] or res.output.splitlines() or [""]
    return res.exit_code, lines[-1]


def _name_of(command: str, flag: str) -> str:
    for p in _command(command).params:
        if flag in getattr(p, "opts", ()) or flag in getattr(p, "secondary_opts", ()):
            return p.name
    raise AssertionError(f"{command} has no {flag}")


@pytest.mark.parametrize("command", ALL)
def test_every_option_is_in_the_table(command):
    refused = {_name_of(command, opt[0]) for cmds, opt, _, _ in REFUSED if command in cmds}
    names = {p.name for p in _command(command).params}
    missing = sorted(names - refused - set(ALWAYS))
    assert not missing, f"{command}: options neither refused anywhere nor said to apply everywhere: {missing}"


CASES = [
    pytest.param(
        command,
        option,
        mode,
        refused,
        id=f"{command} {' '.join(option)} {'no' if refused else 'ok'}: {' '.join(mode) or 'default'}",
    )
    for cmds, option, bad, good in REFUSED
    for command in cmds
    for refused, modes in ((True, bad), (False, good))
    for mode in modes
]


@pytest.mark.parametrize(("command", "option", "mode", "refused"), CASES)
def test_an_option_that_does_nothing_is_refused_and_one_that_applies_is_taken(command, option, mode, refused, tmp_path,
                                                                               monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GROQ_API_KEY", "test-key")
    code, line = _invoke(base(command, tmp_path) + mode + option)
    assert code == 1, line
    if refused:
        assert option[0] in line and MISSING not in line, line
    else:  # taken: the run goes on to read the workload, or stops at another option's error
        assert f"{option[0]} does nothing here" not in line and "does not route" not in line, line
        assert "takes no speed" not in line, line
