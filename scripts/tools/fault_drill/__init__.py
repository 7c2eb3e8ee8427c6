"""Fault drills on the micro config (issue 30): what a user does after a hard kill, a deleted result and a corrupted
file, each checked against an uninterrupted run of the same config. One line per drill, `passed` or `failed`, with
what it compared:

- kill-and-resume: kill -9 of Snakemake and its jobs while an SFT run trains (a Trainer checkpoint written, the run
  not finished); the rerun is refused until `snakemake --unlock`; then it resumes SFT from that checkpoint and every
  result equals the uninterrupted run's (`layerswap audit` against its manifest), the progress log one row per step;
- delete-and-rebuild: a selection, a merge recipe, a folder of merge evaluations, a checkpoint index and an evaluation
  set deleted from a copy of the finished run; a plain `snakemake` rebuilds them with the same bytes;
- corrupt-and-repair: a flipped byte in an expert's weights; a merge reading them refuses with one line, `layerswap
  audit` names the file, `layerswap audit --repair --run` rebuilds it and what depends on it, and the audit against
  the uninterrupted run's manifest passes;
- re-bless: a flipped byte in an expert's weights and its run's `checkpoints.json` deleted; the SFT job that rewrites
  the record refuses the changed file in one line (each export records its weights' sha256 beside them) and writes
  no record; the repair it names (`rm -r` the checkpoint, `snakemake`) restores the uninterrupted run's results;
- relocate-then-edit: results/ alone copied with its modification times (`cp -a`) into a new folder, no
  `.snakemake/`: the same config plans nothing, `bottom: 2` for swap_default plans the jobs it plans in the original
  folder, and the run rebuilds the recipes with bottom 2 (the manifest's records put back: docs/RERUNS.md);
- second-config: the finished folder rerun with ties_d05 renamed and toy_swh_1's lr changed: the old name's recipes
  and evaluations are named before the run and by `layerswap audit` as not from this config, are not in the new
  manifest's files, and `layerswap audit --remove-foreign` removes them (docs/AUDITS.md).


Issue 43 (docs/SECURITY.md): an edited result, a forged record, a hostile manifest and bad config values, each
ending with the clean run's result or one line naming the file and the repair:

- edit-and-launder: one score of a merge evaluation changed by hand (valid JSON); the run stops before building on
  it with one line naming it and the repair, the manifest job (run by hand) refuses to record it, and the repair
  (`layerswap audit --repair --run`) restores the uninterrupted run's results;
- forged-record: results/ moved alone, the manifest's record of swap_default's recipes edited to say `bottom: 2`,
  the config set to bottom 2: the run stops naming the recipes whose record does not describe them, and the repair
  it names (`rm` them, `snakemake`) rebuilds them with bottom 2;
- hostile-manifest: a manifest naming `../victim.txt` as foreign, files under `../victimdir/` (a checkpoint export),
  or `../../../../etc/passwd`: `layerswap audit --remove-foreign`, `--repair --run` and `layerswap audit` each
  refuse in one line; the victims are untouched;
- bad-config: `lr: .nan`, `num_samples: 1e15`, a data source `file: /etc/passwd`: `layerswap check-config` refuses
  each in one line naming the key, in under a second.

    # a new or empty directory; the six drills: 6 min 42 s on 2 shared cores
    python -m scripts.tools.fault_drill WORKDIR
    python -m scripts.tools.fault_drill WORKDIR --only edit-and-launder forged-record hostile-manifest bad-config \
        --reference FINISHED_MICRO_WORKDIR    # these four against an existing run: 2 min 40 s on 2 shared cores

Each Snakemake run (and the repair) relays its progress lines (`N of M steps`, `repair:`) prefixed `|`; its whole
log is `WORKDIR/<drill>/snakemake.log`.
Exit status 1 if a drill failed.
"""
