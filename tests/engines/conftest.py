"""The engine tests' shared server: one vLLM for the session (starting it takes a minute or more)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.vllm import VLLM, serve


@pytest.fixture(scope="session")
def vllm(tmp_path_factory) -> Iterator[VLLM]:
    yield from serve(tmp_path_factory.mktemp("vllm"))
