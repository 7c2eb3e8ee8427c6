"""Site settings for `snakemake --profile cluster`: what a SLURM site must say, in one small file.

`cluster/site.yaml` (copy `cluster/site.example.yaml`), or the file `$LAYERSWAP_SITE` names: the account, the CPU and
GPU partitions, the GPU model (if the site needs one), the GPUs of one node, and optionally the shared Hugging Face
cache and the scratch folder. `cluster/profile.yaml` reads this file through `load_site()` (Snakemake renders
profiles with YTE), so a missing or wrong setting is one line before anything is submitted, dry runs included. Where
SLURM's commands answer (`sinfo`, `sacctmgr`: a login node), the partitions, the account and the GPUs per node are
checked against the cluster too, and `Site.limits` reads the partitions' limits, which cap what the jobs ask for
(`layerswap/workflow/resources.py`: the workflow's own needs, sized by the config's model).

The profile also sets `$LAYERSWAP_SITE` to that file (for its own process and, through SLURM's environment, for the
jobs), and the Snakefile reads the file `$LAYERSWAP_SITE` names (`Site.from_env`): an SFT run's GPU count follows its
batch size and the site's GPUs per node (`Runs.sft_gpus`), and the site's cache and scratch paths fill
`storage.hf_home` / `storage.scratch` where the config leaves them null; `check_storage` checks the paths the jobs
will use before anything is submitted. A run without the profile and without
`$LAYERSWAP_SITE` reads no site file, whatever lies in cluster/.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from layerswap.errors import UserError

ENV = "LAYERSWAP_SITE"
DEFAULT = Path("cluster") / "site.yaml"
EXAMPLE = Path("cluster") / "site.example.yaml"
KEYS = {"account", "partitions", "gpu_model", "gpus_per_node", "hf_home", "scratch"}
PLACEHOLDER = re.compile(r"CHANGE|FIXME|TODO|<.*>|^\s*$", re.IGNORECASE)
# Names SLURM accepts for accounts, partitions and GPU types (no shell metacharacters reach sbatch).
NAME = re.compile(r"^[A-Za-z0-9_.:+-]+$")


@dataclass(frozen=True)
class Site:
    path: Path
    account: str
    cpu_partition: str
    gpu_partition: str
    gpu_model: str | None
    gpus_per_node: int
    hf_home: str | None = None
    scratch: str | None = None

    @staticmethod
    def locate() -> Path:
        """The site file: $LAYERSWAP_SITE, else cluster/site.yaml (from the working directory, like --profile)."""
        return Path(os.environ[ENV]) if os.environ.get(ENV) else DEFAULT

    def limits(self) -> dict[str, dict[str, int]]:
        """{partition: {mem_mb, cpus, runtime}}: the most memory (MB) and CPUs of one node of each of the site's
        partitions and the partition's time limit (minutes), from `sinfo` where it answers (else {}): the caps of
        the jobs' requests (layerswap/workflow/resources.py)."""
        listing = _query(["sinfo", "-h", "-o", "%R|%m|%c|%l"])
        out: dict[str, dict[str, int]] = {}
        for line in (listing or "").splitlines():
            fields = [f.strip() for f in line.split("|")]
            if len(fields) != 4 or fields[0] not in (self.cpu_partition, self.gpu_partition):
                continue
            got = out.setdefault(fields[0], {})
            for key, text in (("mem_mb", fields[1].rstrip("+")), ("cpus", fields[2].rstrip("+"))):
                if text.isdigit():
                    got[key] = max(got.get(key, 0), int(text))
            minutes = _minutes(fields[3])
            if minutes:
                got["runtime"] = max(got.get("runtime", 0), minutes)
        return out

    @staticmethod
    def from_env() -> "Site | None":
        """The site file $LAYERSWAP_SITE names (set by the profile or the user), parsed and checked; None if unset."""
        return parse(os.environ[ENV]) if os.environ.get(ENV) else None


def parse(path: str | Path) -> Site:
    """Read and check a site file; every problem is one UserError naming the file and the key."""
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"{path}: no site file; copy {EXAMPLE} to {DEFAULT} and fill it in, or point {ENV} at yours "
            "(docs/CLUSTER.md)"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise UserError(f"{path}: not a readable YAML file ({' '.join(str(err).split())})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a mapping of site settings ({', '.join(sorted(KEYS))})")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise UserError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    parts = data.get("partitions")
    if not isinstance(parts, dict):
        raise UserError(f"{path}: 'partitions' must map 'cpu' and 'gpu' to partition names")
    values = {"account": data.get("account"), "partitions.cpu": parts.get("cpu"), "partitions.gpu": parts.get("gpu")}
    for key, value in values.items():
        if not isinstance(value, (str, int)) or isinstance(value, bool) or PLACEHOLDER.search(str(value)):
            raise UserError(f"{path}: '{key}' is not set (got {value!r}): your site's SLURM {key.split('.')[-1]} name")
        if not NAME.match(str(value)):
            raise UserError(f"{path}: '{key}' {value!r} is not a SLURM name (letters, digits, _ . : + -)")
    model = data.get("gpu_model")
    if model is not None and (not isinstance(model, str) or not NAME.match(model)):
        raise UserError(f"{path}: 'gpu_model' must be a GPU type name (e.g. h100) or null, got {model!r}")
    gpus = data.get("gpus_per_node")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise UserError(
            f"{path}: 'gpus_per_node' must be a whole number >= 1 (the GPUs of one node of "
            f"partitions.gpu), got {gpus!r}"
        )
    paths = {}
    for key in ("hf_home", "scratch"):
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UserError(f"{path}: '{key}' must be a path or null, got {value!r}")
        # `~` and $VARIABLES are expanded here, on purpose (the jobs see the expanded path)
        paths[key] = expand_path(f"{path}: '{key}'", value) if value else None
    return Site(
        path, str(values["account"]), str(values["partitions.cpu"]), str(values["partitions.gpu"]), model, gpus, **paths
    )


def expand_path(where: str, value: str) -> str:
    """A site path with `~` and $VARIABLES expanded; one UserError where something is left unexpanded (an unset
    variable, `~user` of no user) or where it holds a Snakemake path variable (`<user>`), which the workflow's
    output paths would take for one."""
    out = os.path.expandvars(os.path.expanduser(value))
    left = re.search(r"\$\{?\w+\}?|^~|<[^>]*>", out)
    if left:
        what = (
            "a Snakemake path variable; write the path itself, e.g. $USER for your user name"
            if left.group().startswith("<")
            else "unexpanded (an unset variable or unknown user)"
        )
        raise UserError(f"{where} {value!r}: {left.group()!r} is {what}")
    return out


def check_storage(storage: dict, config_storage: dict, site: "Site | None") -> None:
    """The storage paths the jobs will use (`Spec.storage`: the config's, else the site file's), checked before
    anything is submitted, each problem one UserError naming the file and key: `hf_home` an existing, writable
    directory (the jobs read the pre-staged cache and `datasets` writes its own cache files there); `scratch` a
    writable directory or one that can be created (the SFT jobs write the expert checkpoints there)."""
    for key in ("hf_home", "scratch"):
        value = storage.get(key)
        if not value:
            continue
        where = f"config storage.{key}" if config_storage.get(key) else f"{site.path}: '{key}'" if site else key
        if config_storage.get(key) and re.search(r"<[^>]*>|\$|^~", str(value)):
            raise UserError(
                f"{where} {value!r}: a path variable, `$` or `~` is not expanded in the config; write "
                "the path itself (or leave it null and set it in the site file, which expands $USER, ~)"
            )
        p = Path(value)
        if key == "hf_home" and not p.is_dir():
            raise UserError(
                f"{where} {value!r} is not a directory; create it and pre-stage into it "
                "(`layerswap prestage`, docs/CLUSTER.md)"
            )
        existing = next((q for q in (p, *p.parents) if q.exists()), None)
        if existing is None or not existing.is_dir():
            raise UserError(f"{where} {value!r}: {existing} is not a directory")
        if not os.access(existing, os.W_OK | os.X_OK):
            verb = "is not writable" if existing == p else f"cannot be created ({existing} is not writable)"
            raise UserError(f"{where} {value!r} {verb}: the jobs write there")


def _minutes(limit: str) -> int | None:
    """sinfo's time limit (`infinite`, `30`, `2:00:00`, `1-00:00:00`) in minutes; None where unlimited."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", limit.strip())
    if not m:
        return None
    days, a, b, c = (int(x) if x else None for x in m.groups())
    if c is not None:  # [d-]h:m:s
        hours, minutes = a, b
    elif b is not None:  # [d-]h:m with a day, else m:s
        hours, minutes = (a, b) if days is not None else (0, a)
    else:  # [d-]h with a day, else minutes
        hours, minutes = (a, 0) if days is not None else (0, a)
    return (days or 0) * 1440 + hours * 60 + minutes


def _query(cmd: list[str]) -> str | None:
    """A SLURM command's output, or None where it is not installed or does not answer (not a login node)."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _gpus(gres: str) -> int:
    """GPUs in a GRES string of sinfo (`gpu:8`, `gpu:h100:4(S:0-1)`, `gpu:a100:2,shard:4`)."""
    total = 0
    for item in gres.split(","):
        fields = re.sub(r"\(.*?\)", "", item).split(":")
        if fields[0] == "gpu" and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def check_cluster(site: Site) -> None:
    """Check the site against the cluster, where SLURM's commands answer: both partitions exist, a node of the GPU
    partition has `gpus_per_node` GPUs (of `gpu_model`, if set), and the account is one of the user's."""
    listing = _query(["sinfo", "-h", "-o", "%R|%G"])
    if listing is not None:
        gres: dict[str, list[str]] = {}
        for line in listing.splitlines():
            name, _, res = line.partition("|")
            gres.setdefault(name.strip(), []).append(res.strip())
        for key, part in (("partitions.cpu", site.cpu_partition), ("partitions.gpu", site.gpu_partition)):
            if part not in gres:
                raise UserError(
                    f"{site.path}: '{key}' {part!r} is not a partition of this cluster "
                    f"(sinfo lists: {', '.join(sorted(gres))})"
                )
        nodes = [g for g in gres[site.gpu_partition] if not site.gpu_model or f":{site.gpu_model}:" in f"{g}:"]
        most = max((_gpus(g) for g in nodes), default=0)
        if most < site.gpus_per_node:
            model = f" of model {site.gpu_model!r}" if site.gpu_model else ""
            raise UserError(
                f"{site.path}: 'gpus_per_node' is {site.gpus_per_node}, but the nodes of partition "
                f"{site.gpu_partition!r} have at most {most} GPUs{model} (sinfo: "
                f"{', '.join(sorted(set(gres[site.gpu_partition])))}): an SFT job would never start"
            )
    accounts = _query(["sacctmgr", "-n", "-P", "list", "associations", f"user={_user()}", "format=account"])
    if accounts:  # empty: accounting without associations; the plugin proceeds without checking
        mine = sorted({a.strip().lower() for a in accounts.splitlines() if a.strip()})
        if site.account.lower() not in mine:
            raise UserError(
                f"{site.path}: 'account' {site.account!r} is not one of yours (sacctmgr lists: {', '.join(mine)})"
            )


def _user() -> str:
    import getpass

    return getpass.getuser()


def load_site() -> Site:
    """For the profile (cluster/profile.yaml): the site file, parsed and checked against the cluster. A problem ends
    the run before any submission with one line."""
    try:
        site = parse(Site.locate())
        check_cluster(site)
    except UserError as err:
        # inside the profile's YTE rendering: SystemExit passes through Snakemake's parser as this one line
        raise SystemExit(f"site settings: {err}") from None
    os.environ[ENV] = str(site.path.resolve())  # the Snakefile reads it, and SLURM passes it on to the jobs
    return site
