# layerswap: Layer Swapping for Zero-Shot Cross-Lingual Transfer in LLMs, end to end.
# data -> base -> experts -> selection -> merge recipes -> evaluations -> tables/figures -> report
from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless --configfile names another (configs are complete; they are not merged). Found next to
# this Snakefile, so `--directory <elsewhere>` works without --configfile.
# The file is checked first (readable UTF-8, valid YAML, a mapping: one line naming the file and line otherwise); the
# files --configfile names are checked the same way by the workflow profile (profiles/default/config.yaml), before
# Snakemake reads them.
if not workflow.overwrite_configfiles:
    from layerswap.config import read_config_file
    from layerswap.errors import UserError

    try:
        read_config_file(os.path.join(workflow.basedir, "config", "config.yaml"))
    except UserError as err:
        sys.exit(f"config error: {err}")

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")



report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/select.smk"
include: "rules/merge.smk"
include: "rules/evaluate.smk"
include: "rules/analysis.smk"
include: "rules/audit.smk"
include: "rules/ablations.smk"


rule all:
    default_target: True
    input:
        tables=spec.report.tables,
        heatmap=layout.figure("param_change", "svg"),
        report=spec.report.report_files,
        manifest=layout.manifest(),
        merged=spec.merges.merged_models,
        results=spec.results(),  # every intermediate too: a deleted one is rebuilt (Spec.results)
