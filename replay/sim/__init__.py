"""The simulated inference host: an OpenAI-compatible server whose timing follows a stated model.

It is the default host of ``replay run`` and the backbone of the tests. The client side never imports
it: it talks to it over HTTP like any other host, and compares its records with the sim's truth log.
Modules, one job each: ``profiles`` (named timing parameters), ``prompt`` (messages to token ids),
``prefix_cache`` (block-hash prefix cache), ``engine`` (the timing model), ``wire`` (OpenAI chat bytes),
``truth`` (per-request truth log), ``server`` (aiohttp app and entry points).
"""
