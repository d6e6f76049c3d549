"""The README's test steps: the default one spreads over workers; the real-engine ones (``-m 'engine and not vllm'``,
``-m vllm``) run in one process, so that one engine serves them and a test that times it has it to itself."""

from __future__ import annotations

import pytest

from tests.conftest import engine_run


@pytest.mark.parametrize(
    ("marks", "engines"),
    [("not engine", False), ("", False), ("engine and not vllm", True), ("vllm", True), ("engine", True),
     ("not vllm", False)],
)  # fmt: skip
def test_engine_steps_run_in_one_process(marks: str, engines: bool) -> None:
    assert engine_run(marks) is engines
