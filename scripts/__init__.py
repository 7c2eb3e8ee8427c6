"""The repository's scripts, run from the repository root as `python -m scripts.<package>.<name>`: the measurements
(`scripts/measure/`, each module one measurement whose figures docs/MEASUREMENTS.md records with its command), the check
tools (`scripts/tools/`), and the stand-ins the tests and measurements share (`hub_replica`: a Hub replica on loopback;
`slurm_cluster`: a one-node SLURM; `vllm_cpu_env`: the real vLLM CPU environment; `fixture_world`: a tiny evaluation
world). Not part of the installed package."""
