"""What a host states about itself, read before the probe (replay.twin.host_facts): llama-server's slots and each
slot's context from ``/props``, vLLM's served context from ``/v1/models``."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import orjson

from replay.twin.host_facts import llama_props, read_host_facts

# llama-server 0.3.36 (-np 4 -c 16384), its /props as served, the keys the reader takes and two beside them
PROPS = {"total_slots": 4, "default_generation_settings": {"n_ctx": 4096, "id_slot": -1}, "model_path": "m.gguf"}


@contextmanager
def _host(routes: dict[str, bytes]) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_llama_server_states_its_slots_and_each_slot_s_context() -> None:
    with _host({"/props": orjson.dumps(PROPS), "/v1/models": orjson.dumps({"data": [{"id": "m"}]})}) as url:
        facts = read_host_facts(url, "m")
    assert (facts.slots, facts.max_model_len, facts.kv_tokens) == (4, 4096, None)


def test_the_served_context_of_v1_models_comes_first_and_a_host_that_says_nothing_states_nothing() -> None:
    models = orjson.dumps({"data": [{"id": "m", "max_model_len": 2048}]})
    with _host({"/props": orjson.dumps(PROPS), "/v1/models": models}) as url:
        assert read_host_facts(url, "m").max_model_len == 2048
    with _host({}) as url:
        assert read_host_facts(url, "m").public() == {"kv_tokens": None, "block_size": None, "max_model_len": None,
                                                      "slots": None}  # fmt: skip


def test_props_that_are_not_llama_server_s_give_nothing() -> None:
    for body in (b"[]", b"{", b'{"total_slots": "many"}', b'{"total_slots": -2, "default_generation_settings": 1}'):
        assert llama_props(body) == (None, None), body
