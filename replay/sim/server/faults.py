"""Faults on demand: seeded, at configured rates, one draw per valid request.

Spec: comma-separated ``KIND:RATE[@PARAM][:name=value...]``, e.g.
``429:0.05@2,503:0.02:retry-after=2,500:0.01:should-retry=false,drop:0.01,stall:0.01@5,huge:0.01@4``.

| kind | what the sim does |
|---|---|
| ``400`` .. ``599`` | answers that status at once, in the API's and dialect's error shape |
| ``overflow`` | answers 400 at once: context length exceeded, in the API's and dialect's own wording |
| ``drop`` | closes the connection after half the answer's tokens (n // 2) |
| ``stall`` | writes nothing for PARAM s (default 5) after n // 2 tokens, then goes on |
| ``midstream`` | after n // 2 tokens, an error event in the API's own shape, then the stream ends |
| ``malformed`` | writes one cut-short JSON event after the first token, then goes on |
| ``odd_chunk`` | writes one valid-JSON event of an unexpected shape after the first token, then goes on |
| ``no_usage`` | leaves the usage out though the request asked for it |
| ``usage_off`` | reports the prompt and output counts one too high (plausible, wrong) |
| ``bad_usage`` | reports them as a string, a negative number, a float or 2**64 (one drawn per request, seeded) |
| ``huge`` | pads the first answer token's text so the body is about PARAM megabytes (default 1) |
| ``repeat`` | a degenerate answer: every answer token is its first one again (counts as usual; streamed answers) |

``Retry-After`` goes out by default on 429, 503 and 529. Options of the HTTP kinds: ``retry-after=S``
(seconds; ``@S`` is the same), ``retry-after-ms=MS`` (sends ``retry-after-ms`` only), ``should-retry=true|false``
(sends ``x-should-retry``).

Each request draws one uniform number from ``random.Random(seed)`` in arrival order and the kinds split
[0, 1) in the order given, so kinds never combine and their rates must sum to at most 1. The variant of a
``bad_usage`` comes from a second generator, so it never shifts the first one's draws. The truth log names
the fault each request got.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

STREAM_KINDS = ("drop", "stall", "midstream", "malformed", "odd_chunk", "no_usage", "usage_off", "bad_usage", "huge",
                "repeat")  # fmt: skip
NAMED_KINDS = ("overflow", *STREAM_KINDS)
RETRY_BY_DEFAULT = (429, 503, 529)  # statuses answered with Retry-After unless told otherwise
BAD_USAGE_VARIANTS = ("string", "negative", "float", "huge")
_DEFAULT_PARAM = {"stall": 5.0, "huge": 1.0} | {str(s): 1.0 for s in RETRY_BY_DEFAULT}
_OPTIONS = ("retry-after", "retry-after-ms", "should-retry")
_FORMAT = "KIND:RATE[@PARAM][:name=value...] with KIND an HTTP status 400-599 or one of " + ", ".join(NAMED_KINDS)


def http_status(kind: str | None) -> int | None:
    """The status an HTTP fault kind answers with, or None for any other kind."""
    return int(kind) if kind is not None and kind.isdigit() else None


def _is_kind(kind: str) -> bool:
    return kind in NAMED_KINDS or (kind.isdigit() and len(kind) == 3 and 400 <= int(kind) <= 599)


def _parse_options(part: str, kind: str, items: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in items:
        name, sep, value = item.strip().partition("=")
        if not sep or name not in _OPTIONS:
            raise ValueError(
                f"fault {part!r}: option {item!r} must be one of {', '.join(o + '=...' for o in _OPTIONS)}"
            )
        if http_status(kind) is None:
            raise ValueError(f"fault {part!r}: options are for HTTP kinds (400-599) only")
        if name == "should-retry":
            if value not in ("true", "false"):
                raise ValueError(f"fault {part!r}: should-retry must be true or false")
        else:
            try:
                if float(value) < 0:
                    raise ValueError
            except ValueError:
                raise ValueError(f"fault {part!r}: {name} must be a number >= 0") from None
        options[name] = value
    return options


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Parsed fault rates: ``rates`` in the order given, ``params`` (Retry-After, stall seconds, megabytes),
    ``options`` (per HTTP kind: the named options given)."""

    rates: tuple[tuple[str, float], ...] = ()
    params: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    options: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str | None, seed: int = 0) -> FaultSpec:
        """``429:0.05,drop:0.01,stall:0.02@3,503:0.1:retry-after=2``; ValueError with the reason otherwise."""
        rates: list[tuple[str, float]] = []
        params: dict[str, float] = {}
        options: dict[str, dict[str, str]] = {}
        for part in (spec or "").split(","):
            part = part.strip()
            if not part:
                continue
            kind, *rest = part.split(":")
            if not _is_kind(kind) or not rest:
                raise ValueError(f"fault {part!r}: expected {_FORMAT}")
            if any(k == kind for k, _ in rates):
                raise ValueError(f"fault {kind!r} given twice")
            rate_s, _, param_s = rest[0].partition("@")
            try:
                rate = float(rate_s)
                param = float(param_s) if param_s else _DEFAULT_PARAM.get(kind, 0.0)
            except ValueError:
                raise ValueError(f"fault {part!r}: rate and parameter must be numbers") from None
            if not 0.0 <= rate <= 1.0 or param < 0:
                raise ValueError(f"fault {part!r}: rate must be within [0, 1] and the parameter >= 0")
            opts = _parse_options(part, kind, rest[1:])
            if "retry-after" in opts:
                param = float(opts["retry-after"])
            elif param_s and http_status(kind) is not None:
                opts["retry-after"] = param_s  # @S is retry-after=S
            rates.append((kind, rate))
            params[kind] = param
            if opts:
                options[kind] = opts
        if sum(r for _, r in rates) > 1.0 + 1e-9:
            raise ValueError("fault rates sum to more than 1")
        return cls(tuple(rates), params, seed, options)

    def __bool__(self) -> bool:
        return any(r > 0 for _, r in self.rates)

    def __str__(self) -> str:
        parts = []
        for kind, rate in self.rates:
            opts = self.options.get(kind, {})
            text = f"{kind}:{rate:g}"
            status = http_status(kind)
            if (status is None and kind in _DEFAULT_PARAM) or (status is not None and _sends_retry_after(kind, opts)):
                text += f"@{self.params[kind]:g}"
            parts.append(text + "".join(f":{k}={v}" for k, v in opts.items() if k != "retry-after"))
        return ",".join(parts)


def _sends_retry_after(kind: str, opts: dict[str, str]) -> bool:
    """Retry-After goes out when given, and on 429/503/529 unless only retry-after-ms was."""
    return "retry-after" in opts or (http_status(kind) in RETRY_BY_DEFAULT and "retry-after-ms" not in opts)


class FaultPlan:
    """Draws the fault (or None) of each request in arrival order."""

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self._rng = random.Random(spec.seed)
        self._variants = random.Random(f"bad_usage:{spec.seed}")
        self.counts: dict[str, int] = {k: 0 for k, _ in spec.rates}
        self.draws = 0

    def draw(self) -> str | None:
        if not self.spec:
            return None
        self.draws += 1
        u = self._rng.random()
        edge = 0.0
        for kind, rate in self.spec.rates:
            edge += rate
            if u < edge:
                self.counts[kind] += 1
                return kind
        return None

    def param(self, kind: str) -> float:
        return self.spec.params.get(kind, _DEFAULT_PARAM.get(kind, 0.0))

    def bad_usage_variant(self) -> str:
        """How a ``bad_usage`` request's counts are spoiled (seeded, one draw per such request)."""
        return self._variants.choice(BAD_USAGE_VARIANTS)

    def retry_headers(self, kind: str) -> tuple[dict[str, str], float | None]:
        """The retry headers an HTTP fault answers with, and the wait they ask for in seconds (or None)."""
        opts = self.spec.options.get(kind, {})
        headers: dict[str, str] = {}
        wait: float | None = None
        if _sends_retry_after(kind, opts):
            wait = self.param(kind)
            headers["Retry-After"] = f"{wait:g}"
        if "retry-after-ms" in opts:
            headers["retry-after-ms"] = opts["retry-after-ms"]
            wait = float(opts["retry-after-ms"]) / 1000
        if "should-retry" in opts:
            headers["x-should-retry"] = opts["should-retry"]
        return headers, wait
