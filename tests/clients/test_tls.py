"""TLS: the simulated host over HTTPS (``replay sim --tls``) with a certificate made by openssl; ``--ca-bundle``
trusts it, nothing else does (a classified ``tls`` record and exit code 3, the host never reached), ``--insecure``
skips the check loudly; connection setup (TCP + TLS) is measured apart from TTFT as ``connect_s``."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.records.reader import read_run
from tests.support.sim_process import sim_process
from tests.support.trajectories import simple_turns, write_trajectory

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the certificate")


@contextlib.contextmanager
def https_sim(tls_dir: Path, truth: Path) -> Iterator[tuple[str, Path]]:
    """``replay sim --tls`` in a process of its own: (its https base URL, its certificate)."""
    with sim_process("--profile", "fast", "--tls", "--tls-dir", str(tls_dir), "--truth-log", str(truth)) as (url, said):
        (tls_line,) = said
        assert tls_line.startswith("REPLAY_SIM_TLS cert="), tls_line
        yield url, Path(tls_line.split("=", 1)[1].split(" ", 1)[0])


def _run(tmp_path: Path, url: str, name: str, *extra: str) -> tuple[int, Path, str]:
    work = tmp_path / "w.jsonl"
    if not work.exists():
        for i in range(2):
            write_trajectory(work, f"t{i}", simple_turns(3, output_tokens=5))
    out = tmp_path / f"{name}.jsonl"
    args = ["run", str(work), "--host", url, "--model", "m", "-c", "2", "--retries", "0", "--out", str(out), "-q",
            "--json", *extra]  # fmt: skip
    res = CliRunner().invoke(main, args)
    return res.exit_code, out, res.output


def test_the_https_sim_works_with_its_ca_bundle_and_fails_clearly_without(tmp_path):
    truth = tmp_path / "truth.jsonl"
    with https_sim(tmp_path / "tls", truth) as (url, cert):
        assert cert.is_file() and (cert.parent / "sim-key.pem").stat().st_mode & 0o077 == 0
        code, out, output = _run(tmp_path, url, "trusted", "--ca-bundle", str(cert), "--connection", "per-request")
        assert code == 0, output
        run = read_run(out)
        assert len(run.requests) == 6 and all(r.error is None for r in run.requests)
        assert run.header["host"]["ca_bundle"] == str(cert) and run.header["host"]["insecure"] is False
        # A new connection per call: each one's TCP + TLS setup is measured, and it came before the request's bytes
        # left (t_sent), so it is not in TTFT (t_first_token - t_sent).
        for r in run.requests:
            assert r.connect_s is not None and r.connect_s > 0
            assert r.t_call + r.connect_s <= r.t_sent < r.t_first_token
        summary = orjson.loads(output[output.index("{") :])
        assert summary["connections"]["new"] == 6

        code, out, output = _run(tmp_path, url, "untrusted")
        assert code == 3, output
        run = read_run(out)
        assert run.requests and all(r.error == "tls" for r in run.requests)
        assert all("--ca-bundle" in (r.error_detail or "") and r.retries == 0 for r in run.requests)
        assert "TLS handshake failed" in run.requests[0].error_detail
        assert "certificate not trusted" in output

        code, out, output = _run(tmp_path, url, "insecure", "--insecure")
        assert code == 0, output
        run = read_run(out)
        assert all(r.error is None for r in run.requests) and run.header["host"]["insecure"] is True
        assert "warning: --insecure" in output
    served = [orjson.loads(line) for line in truth.read_text().splitlines()]
    assert sum(t["status"] == "ok" for t in served) == 12  # the untrusted run's calls never reached the host


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--ca-bundle", "CERT"], "--ca-bundle does nothing here"),  # the embedded simulated host: plain HTTP
        (["--host", "http://127.0.0.1:9/v1", "--model", "m", "--insecure"], "--insecure does nothing here"),
        (["--host", "https://127.0.0.1:9/v1", "--model", "m", "--ca-bundle", "NOPE"], "--ca-bundle: "),
        (["--host", "https://127.0.0.1:9/v1", "--model", "m", "--ca-bundle", "CERT", "--insecure"], "with --insecure"),
    ],
)
def test_tls_options_are_refused_where_they_do_nothing(tmp_path, args, said):
    cert = tmp_path / "c.pem"
    cert.write_text("not a certificate")
    work = write_trajectory(tmp_path / "w.jsonl", "t", simple_turns(1))
    args = [str(cert) if a == "CERT" else str(tmp_path / "missing.pem") if a == "NOPE" else a for a in args]
    res = CliRunner().invoke(main, ["run", str(work), "-q", "--out", str(tmp_path / "r.jsonl"), *args])
    assert res.exit_code == 1 and said in res.output, res.output
