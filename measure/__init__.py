"""Measurement scripts: each module is one measurement, run from the repository root as `python -m measure.<name>`
(`--help` gives its options); the figures they gave, and the command that gave each, are in docs/MEASUREMENTS.md
and the pages it lists. `measure.common` holds what they share: random Llama-shaped checkpoints written by the
package's own sharded writer, a small tokenizer, progress lines, and the wall time and peak memory of a subprocess.

The scripts import the package (`layerswap`), each other (`measure.<name>`) and a few test fixtures (`tests.<name>`:
the Hub replica, the one-node SLURM, the CPU vLLM environment) by their full names; none edits `sys.path`.
"""
