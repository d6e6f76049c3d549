"""The workload: recorded agent trajectories loaded, validated and counted once; importers, statistics, synth."""
