"""Replay of recorded scenarios (the oracle vector format): replay.py runs a file, one module per
scenario kind (replay_merge, replay_cpu, replay_devices, replay_memory) turns a scenario into its result."""
