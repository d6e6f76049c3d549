"""The simulated host: a continuous-batching inference engine with prefix caching, over HTTP.

It is the default host of ``replay run`` and the backbone of the tests. The client side never imports
it: it talks to it over HTTP like any other host, and compares its records with the sim's truth log; only
the virtual clock (``replay.runner.virtual_host``, on top) runs its engine in the client's process.
Modules, one job each: ``profiles`` (physical inputs of named hosts, and the step-time model),
``step_table`` (measured step times, interpolated), ``profile_file`` (profiles from TOML or JSON files),
``reference_check`` (the profiles against aiconfigurator's kernel database),
``prefix_cache`` (the KV block pool with chained block hashes and LRU eviction), ``scheduler`` (chunked
prefill, admission, preemption), ``engine`` (its loop on a clock: real time, or the virtual clock's),
``prompt`` (requests to token ids), ``wire`` (OpenAI chat,
completions and Anthropic Messages bytes), ``faults`` (seeded fault injection), ``prometheus``
(``/metrics``), ``truth`` (per-request truth log), ``server`` (aiohttp app and entry points, each request's way
through it: ``pipeline``).
See docs/simulated-host.md.
"""
