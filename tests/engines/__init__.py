"""Against real engines (llama-server, vLLM): marked `engine`; their own step of .ci/run."""
