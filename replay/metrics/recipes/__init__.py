"""The recipes' figures (AgentX, AA-AgentPerf) and what they tally."""
