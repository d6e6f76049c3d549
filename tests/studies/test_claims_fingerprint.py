"""A claims file names the corpus it was measured on (a workload fingerprint): ``[verify] fingerprint`` for every
claim, ``conditions.fingerprint`` for one; a verification on another corpus lists it among what it could not match."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from replay.cli import main
from replay.studies.claims import ClaimsError, load_claims
from replay.workload.trajectory import load_workload
from tests.support.trajectories import simple_turns, write_trajectory

CLAIMS = """
[verify]
window = "2s"
warmup = "0.5s"
fingerprint = "{default}"

[[claim]]
name = "on the file's corpus"
metric = "ttft"
value = 1000
unit = "ms"
conditions = {{ concurrency = 1 }}

[[claim]]
name = "on another corpus"
metric = "ttft"
value = 1000
unit = "ms"
conditions = {{ concurrency = 1, fingerprint = "{other}" }}
"""


def test_a_claim_on_another_corpus_says_so(tmp_path):
    work = tmp_path / "w.jsonl"
    for i in range(2):
        write_trajectory(work, f"w{i}", simple_turns(3, output_tokens=8))
    have = load_workload([work]).fingerprint
    other = "sha256:" + "ab" * 32
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS.format(default=have.upper().replace("SHA256", "sha256"), other=other))
    defaults, loaded = load_claims(claims)
    assert defaults.fingerprint == have  # read as inspect prints it, whatever the case of its hex digits
    assert [c.conditions["fingerprint"] for c in loaded] == [have, other]
    res = CliRunner().invoke(main, ["claims", "verify", str(claims), str(work), "--virtual", "--json", "-q"])
    assert res.exit_code == 0, res.output
    rows = {c["name"]: c for c in orjson.loads(res.stdout)["claims"]}
    assert f"fingerprint: claimed {have}, replayed {have}" in rows["on the file's corpus"]["matched"]
    assert not any(u.startswith("fingerprint") for u in rows["on the file's corpus"]["unmatched"])
    mismatch = [u for u in rows["on another corpus"]["unmatched"] if u.startswith("fingerprint")]
    assert mismatch == [f"fingerprint: claimed {other}, replayed {have} (another corpus)"]


@pytest.mark.parametrize("where", ["verify", "claim"])
def test_a_malformed_fingerprint_is_refused_naming_where(tmp_path, where):
    bad = "sha256:1234"
    text = CLAIMS.format(default=bad if where == "verify" else "sha256:" + "0" * 64, other=bad)
    claims = tmp_path / "claims.toml"
    claims.write_text(text)
    with pytest.raises(ClaimsError) as err:
        load_claims(claims)
    assert str(claims) in str(err.value) and "fingerprint 'sha256:1234'" in str(err.value)
    assert ("[verify]" if where == "verify" else "claim 2 (on another corpus)") in str(err.value)
