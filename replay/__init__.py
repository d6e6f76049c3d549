"""replay: load-test LLM inference hosts with recorded coding-agent trajectories.

Data flow, one module per step:
trajectory (load) → requests (build bodies) → host client (stream, stamp) → records (run file)
→ metrics (summaries) → report (terminal / JSON). The simulated host lives in ``replay.sim`` and is
never imported by the client side.
"""

__version__ = "0.1.0"
