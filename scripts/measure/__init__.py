"""Measurement scripts: each module is one measurement, run from the repository root as
`python -m scripts.measure.<name>` (`--help` gives its options); the figures they gave, and the command that gave
each, are in docs/MEASUREMENTS.md and the pages it lists. `scripts.measure.common` holds what they share: random
Llama-shaped checkpoints written by the package's own sharded writer, a small tokenizer, progress lines, and the wall
time and peak memory of a subprocess.

The scripts import the package (`layerswap`), each other (`scripts.measure.<name>`) and the stand-ins they share with
the tests (`scripts.hub_replica`, `scripts.slurm_cluster`, `scripts.vllm_cpu_env`, `scripts.fixture_world`) by their
full names; none imports a test module, and none edits `sys.path`.
"""
