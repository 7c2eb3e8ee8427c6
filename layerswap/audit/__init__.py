"""Reproducibility audits of a run's results: `layerswap manifest` writes `results/manifest.json`, `layerswap audit`
checks a results folder against one (this run's or another's), traces a table cell or repairs what drifted.

Modules, one concern each:
- `files`: which files a manifest covers, reproducible results apart from run logs, and their hashes;
- `machine`: the software, hardware and environment a manifest records, and how two machines differ;
- `manifest`: the manifest itself, with the job (rule, params, shell command) behind each file (`manifest`);
- `check`: drift between a manifest and the disk (`audit`);
- `trace`: one table cell back to its evaluation files, recipes and checkpoints (`audit --trace`);
- `repair`: the Snakemake command that rebuilds what drifted (`audit --repair`).
"""
