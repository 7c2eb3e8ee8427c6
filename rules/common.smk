# Config validation and ablation planning, once, at parse time; then `spec` (layerswap/workflow/spec.py), the rules'
# view of the config, whose parts the rules call (spec.runs, spec.merges, spec.evals, spec.selection, spec.data,
# spec.report, spec.ablations: runs, pairs, languages, file lists and params) and `layout`, every results path.
# Here only what needs Snakemake's own objects (wildcards, resources, report(), workflow) and the helpers the rules
# share. Nothing reads files written by jobs: the whole DAG is known at dry-run time.
import os
import shlex
from pathlib import Path
import sys

from layerswap.audit.provenance import RUN_OPTIONS_ENV
from layerswap.config import check, validate_config
from layerswap.errors import UserError
from layerswap.fingerprint import command_hash
from layerswap.hashcache import ENV as HASH_CACHE_ENV, folder as hash_cache_folder
from layerswap.inputs import ROOTS_ENV as INPUT_ROOTS_ENV, roots_value as input_roots
from layerswap.data.hub import is_local_source
from layerswap.train.gguf_base import is_gguf_source
from layerswap.workflow.ablations import enabled as enabled_ablations, plan as plan_ablations, with_merge_configs
from layerswap.workflow.resources import Requests
from layerswap.layout import R
from layerswap.scratch import claim as claim_scratch
from layerswap.workflow.site import Site, check_storage
from layerswap.workflow.spec import Spec, storage_of
from layerswap.workflow.words import as_json, evaluate_shell, revision_arg  # params words; shell words

# The config is validated (schema defaults filled in) and never changed after: what config_used records is the
# config. Ablation files add merge configs to a view of their own (spec.merges.configs), checked with the rest.
try:
    SCHEMA = workflow.source_path("../config/schema.yaml")
    validate_config(config, SCHEMA)
    check(config)
    ABLATIONS_DIR = Path(workflow.basedir) / config["ablations_dir"]  # an absolute ablations_dir replaces the base
    ABLATIONS, ABLATION_MERGE_CONFIGS = plan_ablations(config, ABLATIONS_DIR)  # each ablation file has its target
    SELECTED_ABLATIONS = enabled_ablations(config.get("ablations"), list(ABLATIONS))  # what `ablations` builds
    check(validate_config(with_merge_configs(config, ABLATION_MERGE_CONFIGS), SCHEMA))
except UserError as err:  # the files the config came from (--configfile, or the embedded default)
    sys.exit(f"config error: {err} (config file: {', '.join(map(str, workflow.configfiles))})")
# The rules call `layerswap` from PATH: this Snakemake's environment's (layerswap/evaluation/vllm_check.py), and
# a benchmark evaluated with vLLM (evaluation.backend) needs one with vLLM: else a run stops with one line before its
# first job (`onstart`, which Snakemake calls only when jobs are about to run). What runs no job (a dry run, which
# lists the jobs a run from the vLLM environment runs; --lint) goes on: a dry run shows the line as a warning.
from layerswap.evaluation.vllm_check import environment_refusal, use_own_bin

use_own_bin()
ENVIRONMENT_REFUSAL = environment_refusal(config)
if ENVIRONMENT_REFUSAL and getattr(workflow.output_settings, "dryrun", False):
    print(f"config warning: {ENVIRONMENT_REFUSAL} (a run from this environment stops before its first job)",
          file=sys.stderr)


onstart:
    if ENVIRONMENT_REFUSAL:
        sys.exit(f"config error: {ENVIRONMENT_REFUSAL} (config file: {', '.join(map(str, workflow.configfiles))})")


try:  # the site file $LAYERSWAP_SITE names (the cluster profile sets it): GPUs per node, cache and scratch paths
    SITE = Site.from_env()
except UserError as err:
    sys.exit(f"site settings: {err}")
# The storage paths the jobs use (the config's, else the site file's) are checked first; then the main Snakemake
# process (dry runs too) gives this results folder its own namespace on storage.scratch, or is refused in one line
# where another results folder owns it (layerswap/scratch.py); the jobs read its id.
MAIN_PROCESS = not workflow.remote_exec and not workflow.subprocess_exec
STORAGE = storage_of(config, SITE)
try:
    if SITE is not None:
        check_storage(STORAGE, config["storage"], SITE)
except UserError as err:
    sys.exit(f"site settings: {err}")
try:
    if STORAGE.get("scratch") and MAIN_PROCESS:
        for line in claim_scratch(STORAGE["scratch"], Path(R))[1]:
            print(line, file=sys.stderr)
    spec = Spec(config, ABLATIONS, ABLATION_MERGE_CONFIGS, SELECTED_ABLATIONS, SITE)
except UserError as err:
    sys.exit(f"scratch: {err}")
layout = spec.layout  # every results path the rules name (layerswap/layout.py)
evals = spec.evals  # the evaluation jobs: benchmarks, languages, data files, params (workflow/evaluation_jobs.py)
PAIRS, SOUPS = spec.merges.pairs, spec.merges.soups  # a language's expert pairs l<i>m<j>; langsoup, multisoup
SOUPSWAP = spec.merges.soup_swap  # the merge config of the soup-then-swap recipes: soupswap (layerswap/contracts.py)
# Verify once (layerswap/hashcache.py): the sha256s the jobs verified, by file state, shared by every job of the run
# (LAYERSWAP_HASH_CACHE set to an empty string turns it off).
os.environ.setdefault(HASH_CACHE_ENV, os.path.abspath(hash_cache_folder(layout)))
# A recipe reads checkpoints under the results folder or the configured storage only (layerswap/inputs.py).
os.environ[INPUT_ROOTS_ENV] = input_roots(layout.root, layout.big)
# This run's options, for the repair command a job's own stop line prints (layerswap/audit/provenance.py).
os.environ[RUN_OPTIONS_ENV] = shlex.join(sys.argv[1:])
try:  # with a site file: what each job asks of SLURM (`resources:`)
    requests = Requests(config, spec, SITE)
except UserError as err:
    sys.exit(f"site settings: {err}")

# Provenance that travels with results/ (layerswap/audit/provenance.py): before the DAG is built, the records of how
# each existing output was made that results/manifest.json holds and .snakemake/metadata lacks are put back (so a
# moved results folder reruns what the config changed), results with no provenance stop the run with one line, and
# files no job of this config makes are named. In the main Snakemake process with the file backend only (a job's
# own Snakemake, e.g. on a cluster node, skips it); `--unlock`, `--cleanup-metadata` and `--touch` (which records
# the current params of what it touches: the way to adopt results that have no record) are never stopped.
if MAIN_PROCESS and workflow.workflow_settings.persistence_backend.name == "FILE":
    from layerswap.audit.provenance import check as check_provenance, forced_outputs

    try:
        for line in check_provenance(spec, forced=forced_outputs(sys.argv[1:]), argv=sys.argv[1:]):
            print(line, file=sys.stderr)
    except UserError as err:
        if not {"--unlock", "--cleanup-metadata", "--cm", "--touch", "-t"} & set(sys.argv):
            sys.exit(f"provenance: {err}")
        print(f"provenance: {err}", file=sys.stderr)


wildcard_constraints:
    run="[A-Za-z0-9_]+",
    expert="[A-Za-z0-9_]+",
    lang="[A-Za-z0-9_]+",
    cfg="[A-Za-z0-9_]+",


# Every rule's `code` param is command_hash(<the layerswap command it runs>): the package files that command's import
# graph reaches (layerswap/fingerprint.py), so a code edit reruns exactly the jobs whose command can run it.


def sft_launch(wildcards, resources):
    """`layerswap sft` or `accelerate launch ...` for the job's run and GPUs (Runs.sft_launch)."""
    return spec.runs.sft_launch(wildcards.run, resources.gpu, workflow.basedir)


# The benchmarks of one evaluation job: grouped, a fixed list; single (evaluation.tasks_per_job), its {benchmark}.
def checkpoint_job_benchmarks(wildcards):
    """The benchmarks of one job of evaluate_checkpoints: the run's primary selection benchmarks (all that selection
    reads but the leaders' constraint benchmarks), or its {benchmark}."""
    return evals.job_benchmarks(wildcards, evals.primary_benchmarks(wildcards.run))


def base_job_benchmarks(wildcards):
    """The benchmarks of one job of evaluate_base: those selection constraints do not read, or its {benchmark}."""
    return evals.job_benchmarks(wildcards, evals.base_rest)


def merge_job_benchmarks(wildcards):
    """The benchmarks of one merge evaluation job: evaluation.merge_tasks, or its {benchmark} (single layout)."""
    return evals.job_benchmarks(wildcards, evals.merge_benchmarks)


def table_report(stem, ext):
    sub, caption = spec.report.table_pages[stem]
    fmt = "rendered (HTML)" if ext == "html" else ext.upper()
    return report(layout.table(stem, ext), category="Tables", subcategory=sub, caption=caption,
                  labels={"table": stem, "format": fmt})


def figure_report(name, ext):
    sub, caption = spec.report.figures[name]
    fmt = "numbers (CSV)" if ext == "csv" else ext.upper()
    return report(layout.figure(name, ext), category="Figures", subcategory=sub, caption=caption,
                  labels={"figure": name, "format": fmt})


def ablation_report(name, file):
    return report(layout.ablation_file(name, file), category="Ablations",
                  subcategory=spec.ablations.planned[name]["title"], caption="../report/ablation.rst",
                  labels={"ablation": name, "file": file})
