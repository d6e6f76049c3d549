"""Everything a run needs, in groups: the workload, the host (and how calls are sent to it), the load, the loop that
runs it (open loop, worker processes), the simulated host, the soak's jobs, the verdict's gates and the recipe.

``RunSpec`` is also the library's face (``replay.RunSpec``, docs/api.md), whose older form was one flat list of
fields. That form still works, as aliases into the groups: ``RunSpec(host=..., sim_profile="fast")`` puts each value
in its group, and ``spec.host`` reads and writes ``spec.endpoint.host``. The groups are the one way the code reads
them; the aliases (``FLAT``) are kept for scripts written against the flat form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from replay.clients.flavours.base import RequestOptions
from replay.clients.host import DEFAULT_MAX_RESPONSE_BYTES, HostConfig
from replay.hosts.resolve import ResolvedHost
from replay.loops.load import LoadConfig
from replay.runner.recipes import RecipeFacts
from replay.workload.history import HistoryPolicy


@dataclass(slots=True)
class WorkloadSpec:
    trajectories: list[str] = field(default_factory=list)  # files or directories (none: the shipped workload)
    tokenizer: str | None = None
    history: HistoryPolicy = field(default_factory=HistoryPolicy)
    unrecorded_context: str = "pad"  # pad | omit: the context recordings left out put back (workload/padding.py)


@dataclass(slots=True)
class HostSpec:
    """Which host (None: the embedded simulated host), how to reach it, and what each call sends."""

    host: str | None = None  # a URL, a preset or a hosts-file name (NAME[:MODEL]); replay.hosts.resolve
    model: str | None = None
    api: str = "chat"  # chat | completions | responses | anthropic
    api_key_env: str = "OPENAI_API_KEY"
    dialect: str | None = None  # a preset's fields and options applied to any URL (or the sim)
    hosts_file: str | None = None  # default: ./replay.toml when present
    headers: dict[str, str] = field(default_factory=dict)
    connection: str = "session"  # session | per-request
    service_tier: str | None = None
    speed: str | None = None
    route_sort: str | None = None
    route_order: list[str] = field(default_factory=list)
    route_only: list[str] = field(default_factory=list)
    fallbacks: bool | None = None  # False: --no-fallbacks
    rate_card: str | None = None  # a shipped card's name or input=..,output=.. (over the hosts file's)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    follow_redirects: bool = False  # --follow-redirects: a host's redirects within its origin (never elsewhere)
    source_addresses: list[str] = field(default_factory=list)  # --source-address: local addresses to connect from
    ca_bundle: str | None = None  # --ca-bundle: the CA certificates a https host's certificate must chain to
    insecure: bool = False  # --insecure: no TLS verification (warned about, in the header)
    transport: str = "http"  # --transport: http | websocket (Responses over one socket per session)
    force_output_length: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    cache_control: str = "none"  # anthropic: none | auto
    responses_state: str = "none"  # responses: none | previous
    retries: int | None = None  # None: 3 against a real host, 0 against the simulated one
    check_answers: bool | None = None  # None: the free checks; True: the text too; False: none (answer_check)
    keep_answers: bool = False  # each answer's text on its record (hosts side by side: their agreement)
    # The host as replay.hosts.resolve resolved it, once per run (runner.single_run.resolve_host): the fields above
    # then hold its URL, model, flavour, key variable, body and headers.
    resolved: ResolvedHost | None = None

    def host_config(self, base_url: str, model: str, resend_stale: bool = True) -> HostConfig:
        """The client's view of the host at ``base_url`` (the embedded one's, or the resolved URL) for ``model``;
        ``resend_stale``: a call a kept-alive connection lost before any byte came back is sent again, once."""
        dialect = self.resolved.dialect if self.resolved is not None else None
        return HostConfig(base_url, model, self.api, self.api_key_env, self.request_timeout_s, self.stall_timeout_s,
                          self.max_response_bytes, dialect, self.headers, self.connection, self.follow_redirects,
                          resend_stale=resend_stale, source_addresses=tuple(self.source_addresses),
                          ca_bundle=self.ca_bundle, insecure=self.insecure, transport=self.transport)  # fmt: skip

    def request_options(self, model: str) -> RequestOptions:
        """What every call's body carries besides its messages."""
        checks = {None: "free", True: "all", False: "off"}[self.check_answers]
        return RequestOptions(model, self.force_output_length, self.extra_body, self.cache_control,
                              self.responses_state, checks, self.keep_answers, self.transport)  # fmt: skip


@dataclass(slots=True)
class LoopSpec:
    """Which loop runs the load and where: the open loop's arrivals and cap, worker processes, Ray."""

    arrivals: Any = None  # an open loop's arrivals (replay.loops.arrivals.Arrivals); None: the closed loop
    max_live: int | None = None  # open loop: sessions at once (default: the concurrency)
    workers: int = 1  # processes the closed loop's lanes are sharded over (replay.scale.workers); 1: this one
    ray: str | None = None  # --ray ADDRESS: the workers as actors on that Ray cluster (workers 0: one per its CPUs)
    ray_listen: str | None = None  # where the actors connect back (default: this node's IP as Ray knows it)


@dataclass(slots=True)
class SimSpec:
    """The embedded simulated host, when there is no host (replay sim: docs/simulated-host.md)."""

    profile: str = "default"
    profile_file: str | None = None  # a profile from a file (its base: ``profile``)
    truth_log: str | None = None
    faults: str | None = None
    fault_seed: int = 0
    dialect: str | None = None
    fallback: str | None = None


@dataclass(slots=True)
class SoakSpec:
    """The jobs beside a long run: windows, resuming, the live figures and the host's own metrics."""

    window_s: float | None = None  # window records every this many seconds (None: 60 s for runs of 10 min or more)
    resume: bool = False  # go on with the run in ``out`` (replay run --resume): see replay.runner.resume
    prometheus: str | None = None  # HOST:PORT to serve the live figures at /metrics
    scrape_metrics: str | None = None  # the host's Prometheus endpoint, sampled every window


@dataclass(slots=True)
class GateSpec:
    """How the run is judged: thresholds (replay.verdict.thresholds) and the baseline gate."""

    thresholds: list[str] = field(default_factory=list)  # 'ttft_p95<2s', ...
    slo: list[str] = field(default_factory=list)  # goodput's per-call SLO: 'ttft<=2s', 'user_decode_tps>=30', ...
    abort_on_fail: bool = False  # stop the run as soon as a threshold is breached (checked every few seconds)
    baseline: str | None = None  # an earlier run file: figures worse than it by more than the tolerance fail the run
    baseline_tolerance: float = 0.10
    history_file: str | None = None  # a history file (replay history): tonight starting a worse regime fails the run


@dataclass(slots=True)
class RecipeSpec:
    name: str | None = None  # agentx | aa-agentperf (replay.runner.recipes), already applied to the other groups
    facts: RecipeFacts = field(default_factory=RecipeFacts)  # GPUs, power, SLO tiers


# The flat form's names: each is its group's field (docs/api.md lists them).
FLAT: dict[str, tuple[str, str]] = {
    "trajectories": ("workload", "trajectories"),
    "tokenizer": ("workload", "tokenizer"),
    "history": ("workload", "history"),
    "unrecorded_context": ("workload", "unrecorded_context"),
    **{name.name: ("endpoint", name.name) for name in dataclasses.fields(HostSpec) if name.name != "resolved"},
    **{name.name: ("loop", name.name) for name in dataclasses.fields(LoopSpec)},
    **{f"sim_{name.name}": ("sim", name.name) for name in dataclasses.fields(SimSpec)},
    **{name.name: ("soak", name.name) for name in dataclasses.fields(SoakSpec)},
    **{name.name: ("gate", name.name) for name in dataclasses.fields(GateSpec)},
    "recipe": ("recipe_spec", "name"),
    "recipe_facts": ("recipe_spec", "facts"),
}

# What the resolved host depends on: changing one of these through the flat form resolves the host again.
RESOLVES = {name for name, (group, _) in FLAT.items() if group == "endpoint"} | {"sim_dialect", "recipe_facts"}

T = TypeVar("T")


class Flat(Generic[T]):
    """One name of the flat form: reads and writes its group's field."""

    def __init__(self) -> None:
        self.name = self.group = self.field = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, (self.group, self.field) = name, FLAT[name]

    @overload
    def __get__(self, spec: None, owner: type) -> Flat[T]: ...

    @overload
    def __get__(self, spec: object, owner: type | None = None) -> T: ...

    def __get__(self, spec: object, owner: type | None = None) -> T | Flat[T]:
        if spec is None:
            return self
        value: T = getattr(getattr(spec, self.group), self.field)
        return value

    def __set__(self, spec: RunSpec, value: T) -> None:
        setattr(getattr(spec, self.group), self.field, value)
        if self.name in RESOLVES:
            spec.endpoint.resolved = None


@dataclass(slots=True, init=False)
class RunSpec:
    """Everything a run needs, in groups; the flat names of the older form are accepted and mapped (``FLAT``)."""

    workload: WorkloadSpec
    endpoint: HostSpec
    load: LoadConfig
    loop: LoopSpec
    sim: SimSpec
    soak: SoakSpec
    gate: GateSpec
    recipe_spec: RecipeSpec
    out: str | None
    progress: bool

    def __init__(
        self,
        trajectories_: list[str] | None = None,
        /,
        *,
        workload: WorkloadSpec | None = None,
        endpoint: HostSpec | None = None,
        load: LoadConfig | None = None,
        loop: LoopSpec | None = None,
        sim: SimSpec | None = None,
        soak: SoakSpec | None = None,
        gate: GateSpec | None = None,
        recipe_spec: RecipeSpec | None = None,
        out: str | None = None,
        progress: bool = True,
        **flat: Any,
    ) -> None:
        # Each group is this spec's own copy, so changing one spec (spec.host = ...) never changes another made from
        # it (dataclasses.replace hands the groups on).
        self.workload = dataclasses.replace(workload) if workload is not None else WorkloadSpec()
        self.endpoint = dataclasses.replace(endpoint) if endpoint is not None else HostSpec()
        self.load = load if load is not None else LoadConfig()  # frozen: shared safely
        self.loop = dataclasses.replace(loop) if loop is not None else LoopSpec()
        self.sim = dataclasses.replace(sim) if sim is not None else SimSpec()
        self.soak = dataclasses.replace(soak) if soak is not None else SoakSpec()
        self.gate = dataclasses.replace(gate) if gate is not None else GateSpec()
        self.recipe_spec = dataclasses.replace(recipe_spec) if recipe_spec is not None else RecipeSpec()
        self.out, self.progress = out, progress
        unknown = sorted(set(flat) - set(FLAT))
        if unknown:
            raise TypeError(f"RunSpec() got unexpected keyword arguments: {', '.join(unknown)}")
        if trajectories_ is not None:  # the older form's one positional argument: RunSpec(["w.jsonl"], host=...)
            flat = {"trajectories": list(trajectories_), **flat}
        for name, value in flat.items():
            setattr(self, name, value)

    # The flat form (docs/api.md): each name is its group's field.
    trajectories = Flat[list[str]]()
    tokenizer = Flat[str | None]()
    history = Flat[HistoryPolicy]()
    unrecorded_context = Flat[str]()
    host = Flat[str | None]()
    model = Flat[str | None]()
    api = Flat[str]()
    api_key_env = Flat[str]()
    dialect = Flat[str | None]()
    hosts_file = Flat[str | None]()
    headers = Flat[dict[str, str]]()
    connection = Flat[str]()
    service_tier = Flat[str | None]()
    speed = Flat[str | None]()
    route_sort = Flat[str | None]()
    route_order = Flat[list[str]]()
    route_only = Flat[list[str]]()
    fallbacks = Flat[bool | None]()
    rate_card = Flat[str | None]()
    request_timeout_s = Flat[float]()
    stall_timeout_s = Flat[float]()
    max_response_bytes = Flat[int]()
    follow_redirects = Flat[bool]()
    source_addresses = Flat[list[str]]()
    ca_bundle = Flat[str | None]()
    insecure = Flat[bool]()
    transport = Flat[str]()
    force_output_length = Flat[bool]()
    extra_body = Flat[dict[str, Any]]()
    cache_control = Flat[str]()
    responses_state = Flat[str]()
    retries = Flat[int | None]()
    check_answers = Flat[bool | None]()
    keep_answers = Flat[bool]()
    arrivals = Flat[Any]()
    max_live = Flat[int | None]()
    workers = Flat[int]()
    ray = Flat[str | None]()
    ray_listen = Flat[str | None]()
    sim_profile = Flat[str]()
    sim_profile_file = Flat[str | None]()
    sim_truth_log = Flat[str | None]()
    sim_faults = Flat[str | None]()
    sim_fault_seed = Flat[int]()
    sim_dialect = Flat[str | None]()
    sim_fallback = Flat[str | None]()
    window_s = Flat[float | None]()
    resume = Flat[bool]()
    prometheus = Flat[str | None]()
    scrape_metrics = Flat[str | None]()
    thresholds = Flat[list[str]]()
    slo = Flat[list[str]]()
    abort_on_fail = Flat[bool]()
    baseline = Flat[str | None]()
    baseline_tolerance = Flat[float]()
    history_file = Flat[str | None]()
    recipe = Flat[str | None]()
    recipe_facts = Flat[RecipeFacts]()
