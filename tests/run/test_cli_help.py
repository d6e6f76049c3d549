"""What a new user reads first: `replay --help`, `replay sim --help`, `replay sim --list-profiles`."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.cli.options import profile_names
from replay.sim.core.profiles import PROFILES


@pytest.mark.parametrize("width", [60, 80, 200])
def test_group_help_lists_every_command_with_its_whole_description(width):
    res = CliRunner().invoke(main, ["--help"], terminal_width=width)
    assert res.exit_code == 0, res.output
    commands = res.output.split("Commands:", 1)[1]
    assert "..." not in commands  # click shortens to ~45 characters with "..." unless told otherwise
    listing = re.sub(r"-\s+", "-", " ".join(commands.split()))  # the wrapper may break after a hyphen
    for name, cmd in main.commands.items():
        first = re.sub(r"-\s+", "-", " ".join(cmd.help.split("\n\n")[0].split()))
        assert f"{name} {first}" in listing, (name, listing)


def test_sim_help_names_every_profile_and_the_helper_lists_them_all():
    assert profile_names().split(", ") == list(PROFILES)
    res = CliRunner().invoke(main, ["sim", "--help"], terminal_width=200)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert f"one of: {', '.join(PROFILES)}." in text
    assert "h100-8b" in text


def test_list_profiles_is_one_json_document():
    res = CliRunner().invoke(main, ["sim", "--list-profiles"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)  # one document: a JSON parser reads it whole
    assert [r["profile"] for r in rows] == list(PROFILES)
    assert all(r["description"] for r in rows)
    assert all("kv_budget_tokens" in r for r in rows if not PROFILES[r["profile"]].instant)
