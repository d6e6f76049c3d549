"""Image parts on the wire: an H CUA-style trajectory replayed with its screenshots against the simulated host in
every flavour that takes images, the images and tokens of each request recounted here from the canonical file and
checked against the host's truth log; completions refused; a text-only host's refusals classified."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import orjson
import pytest

from replay.clients.errors import http_error_class
from replay.clients.flavours.anthropic import message_blocks
from replay.clients.flavours.responses import message_items
from replay.loops.closed_loop import LoadConfig
from replay.records.reader import read_run
from replay.runner.run_error import RunError
from replay.runner.single_run import RunSpec, execute
from replay.sessions.tool_time import ToolTimePolicy
from replay.workload.importers import import_paths, write_canonical

FIX = Path(__file__).resolve().parents[1] / "workload" / "fixtures" / "corpora"


def _canonical(tmp_path: Path, window: int | None = None) -> Path:
    out = tmp_path / "hcua.jsonl"
    with out.open("wb") as fh:
        write_canonical(import_paths([FIX / "hcua_session.jsonl"], screenshot_window=window).trajectories, fh)
    return out


def _images_per_request(path: Path) -> list[int]:
    """An independent recount: each request's context (truncate, then append) and the image parts in it."""
    context: list[dict] = []
    counts = []
    for turn in (json.loads(x) for x in path.read_text().splitlines()[1:]):
        if turn.get("truncate_to") is not None:
            del context[turn["truncate_to"] :]
        context += turn["append"]
        counts.append(
            sum(1 for m in context if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image")
        )
        context.append({"role": "assistant", "content": turn["output"].get("content")})
    return counts


def _run(tmp_path: Path, path: Path, api: str, **kw) -> tuple[object, dict]:
    spec = RunSpec(
        trajectories=[str(path)], api=api, load=LoadConfig(concurrency=1, tool_time=ToolTimePolicy.parse("none")),
        out=str(tmp_path / f"{api}.jsonl"), sim_profile="instant", sim_truth_log=str(tmp_path / f"{api}.truth.jsonl"),
        progress=False, **kw,
    )  # fmt: skip
    run = read_run(execute(spec).path)
    truth = {t["request_id"]: t for t in map(orjson.loads, (tmp_path / f"{api}.truth.jsonl").read_bytes().splitlines())}
    return run, truth


@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_screenshots_reach_the_host_as_images_in_every_flavour_that_takes_them(tmp_path, api, window):
    path = _canonical(tmp_path, window)
    expected = _images_per_request(path)
    assert expected == ([1, 1, 1] if window is None else [1, 2, 2])
    run, truth = _run(tmp_path, path, api)
    assert [r.error for r in run.requests] == [None] * 3
    by_turn = sorted(run.requests, key=lambda r: r.turn)
    assert [truth[r.id]["images"] for r in by_turn] == expected  # the host's own count
    # the images are in the context's size as the client counted it, and as the host counted it
    assert [truth[r.id]["prompt_tokens"] for r in by_turn] == [r.prompt_tokens_est for r in by_turn]
    assert run.header["workload"]["images"] == (3 if window is None else 4)  # image parts the turns append


def test_the_same_screenshot_is_cached_by_the_host(tmp_path):
    """Window 2 sends S2 again in the third request: its image tokens are the same ids, so a host caches them
    wherever it finds the same prefix (here the prefix breaks earlier, at the cleaned first screenshot)."""
    path = _canonical(tmp_path, 2)
    run, truth = _run(tmp_path, path, "chat")
    second = next(r for r in run.requests if r.turn == 1)
    assert truth[second.id]["cached_tokens"] >= 255  # the first request's screenshot, in the reused prefix


def test_completions_refuses_a_workload_with_images(tmp_path):
    with pytest.raises(RunError, match=r"--api completions: its prompts are text, and the workload holds 3 image"):
        _run(tmp_path, _canonical(tmp_path), "completions")


def test_a_text_only_host_refuses_images_with_their_own_error_class(tmp_path):
    profile = tmp_path / "text-only.toml"
    profile.write_text('base = "instant"\naccepts_images = false\n')
    run, truth = _run(tmp_path, _canonical(tmp_path), "chat", sim_profile_file=str(profile))
    assert [r.error for r in run.requests] == ["images_refused"] * 3
    assert {t["status"] for t in truth.values()} == {"bad_request"} and {t["images"] for t in truth.values()} == {1}


@pytest.mark.parametrize(
    "body",
    [
        b'{"object":"error","message":"Qwen/Qwen3-8B is not a multimodal model","type":"BadRequestError","code":400}',
        b'{"error":{"message":"Invalid content type. image_url is only supported by certain models.","code":null}}',
        b'{"error":{"code":500,"message":"image input is not supported by this server","type":"server_error"}}',
    ],
)
def test_image_refusals_as_real_hosts_word_them(body):
    assert http_error_class(400, body) == "images_refused"
    assert http_error_class(400, b'{"error":{"message":"max_tokens must be at least 1"}}') == "http_4xx"


def _png(width: int, height: int) -> str:
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height) + b"\x08\x00"
    return "data:image/png;base64," + base64.b64encode(head).decode()


def test_each_flavour_renders_image_parts_as_its_own():
    url = _png(8, 8)
    raw = {
        "role": "user",
        "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}],
    }
    assert message_items(raw) == [
        {"role": "user", "content": [{"type": "input_text", "text": "look"},
                                     {"type": "input_image", "image_url": url, "detail": "auto"}]}
    ]  # fmt: skip
    role, blocks = message_blocks(raw)
    media, data = url[5:].split(";base64,")
    image = {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    assert (role, blocks) == ("user", [{"type": "text", "text": "look"}, image])
    tool = {"role": "tool", "tool_call_id": "c1", "content": raw["content"]}
    assert message_blocks(tool)[1][0]["content"][1]["type"] == "image"  # a tool result may carry images
    assert message_items(tool)[0]["output"][1]["type"] == "input_image"
    by_url = message_blocks(
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/s.png"}}]}
    )
    assert by_url[1] == [{"type": "image", "source": {"type": "url", "url": "https://x/s.png"}}]
