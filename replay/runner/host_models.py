"""The host's own list of models, read when ``--model`` is not given: its first model, or why there is none (a host
that could not be reached is told apart from one that lists nothing: the first is a run that could not complete)."""

from __future__ import annotations

from ssl import SSLContext
from typing import Any

import aiohttp

from replay import event_loop
from replay.clients import http_session, tls
from replay.clients.client import make_flavour
from replay.clients.flavours.base import RequestOptions
from replay.clients.watchdog import REDIRECTS, redirect_target
from replay.runner.run_error import EXIT_INCOMPLETE, RunError


async def detect_model(
    base_url: str, timeout_s: float = 10.0, headers: dict[str, str] | None = None, ssl: SSLContext | bool = True
) -> str | None:
    """The first model a host lists at /models, for when --model is not given (``headers``: its auth)."""
    return (await list_model(base_url, timeout_s, headers, ssl))[0]


async def list_model(
    base_url: str, timeout_s: float = 10.0, headers: dict[str, str] | None = None, ssl: SSLContext | bool = True
) -> tuple[str | None, str | None]:
    """(the first model the host lists at /models, or None; why the host could not be reached, or None). A redirect
    is not followed (its auth stays with its origin: ``replay.clients.http_session``): RunError naming where it
    pointed. ``ssl``: the run's TLS setting (``replay.clients.tls``)."""
    url = base_url.rstrip("/") + "/models"
    try:
        async with (
            http_session.session(ssl=ssl, timeout=aiohttp.ClientTimeout(total=timeout_s)) as http,
            http.get(url, headers=headers, allow_redirects=False) as resp,
        ):
            if resp.status in REDIRECTS:
                target = redirect_target(url, resp.headers.get("Location"))
                raise http_session.RedirectNotFollowed(resp.status, target)
            data = await resp.json(content_type=None)
            return str(data["data"][0]["id"])[:200], None
    except http_session.RedirectNotFollowed as exc:
        raise RunError(f"{url} answered: {exc} (the key stays with the host's origin); give --model, or --host the "
                       "URL it points to") from None  # fmt: skip
    except aiohttp.ClientSSLError as exc:
        return None, tls.tls_detail(exc)[:400]
    except (aiohttp.ClientConnectionError, TimeoutError) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:200] if str(exc) else type(exc).__name__
    except (aiohttp.ClientError, ValueError, KeyError, IndexError, TypeError):
        return None, None


def listed_model(spec: Any, base_url: str, key: str | None) -> str:
    """The host's first listed model, when --model is not given; RunError naming why there is none (exit 3 when the
    host could not be reached: nothing could run against it)."""
    auth = make_flavour(spec.api, RequestOptions("m")).headers(key)  # a hosted API lists models to its keys
    ssl = tls.context(spec.ca_bundle, spec.insecure)
    model, unreachable = event_loop.run(list_model(base_url, headers=auth, ssl=ssl))
    if unreachable:
        raise RunError(f"the host was never reached ({unreachable}): {base_url}/models could not be read to find a"
                       " model (give --model, or check --host)", EXIT_INCOMPLETE)  # fmt: skip
    if not model:
        raise RunError(f"no --model given and {base_url}/models lists no model")
    return model
