"""A one-node SLURM cluster on loopback, for the tests of the cluster path (tests/test_slurm.py) and for
scripts/measure/slurm.py.

Real daemons from Debian's packages (`make slurm-deps` installs slurm-wlm, slurmdbd, munge, mariadb-server): munged,
mariadbd (the accounting database), slurmdbd, slurmctld and slurmd, all in one folder of their own (configs, state,
sockets, logs), on free loopback ports, started in that order and stopped by the PIDs recorded here. The node
advertises more than the machine has (`SlurmdParameters=config_overrides`): 64 CPUs, 1 TB and 8 GPUs, so the
profile's unshrunk requests (an 8-GPU SFT job with 64 CPUs and 480 GB) schedule as they would on a GPU node. The GPUs
are character devices equal to /dev/null (22.05 drops a GRES without `File=` and rejects regular files). Partitions
`cpu` (default, no time limit) and `gpu` (4 hours); accounting enforced by associations with one account,
`layerswap_test`, holding root. One cluster per machine (munge's socket and /etc/slurm/slurm.conf are fixed paths):
a cluster whose process was killed before it could stop leaves its link and its daemons (each in a session of its
own), and the next cluster clears them (`reap_stale`, by the owner and daemon records in the cluster's folder).

Needs root (SlurmUser=root, as on a one-node test cluster); `Cluster.unavailable()` says why it cannot run here.
Why hand-written: no maintained Python package starts a real SLURM (the pytest plugins mock its commands), and the
daemons' own start-up is a handful of commands.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sacctmgr", "sbatch")
ACCOUNT = "layerswap_test"
NODE = {"cpus": 64, "mem_mb": 1_000_000, "gpus": 8}
GPU_MAX_TIME = (
    "4:00:00"  # the gpu partition's time limit, which caps what jobs ask for (layerswap/workflow/resources.py)
)
# srun inside a job finds the config only at the default path: the jobstep plugin drops SLURM_CONF (every SLURM_*
# variable but the job's identity) from the job step's environment. So the cluster links it there while it runs.
ETC_CONF = Path("/etc/slurm/slurm.conf")
MUNGE_RUN = Path("/run/munge")
MUNGE_SOCKET = MUNGE_RUN / "munge.socket.2"
MUNGE_LOG = MUNGE_RUN / "layerswap-test.log"
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
# In the cluster's folder: the process that started it and the daemons it started, each as "PID START" (START: the
# process's start time in clock ticks since boot, /proc/PID/stat field 22, so that a reused PID is not taken for it).
OWNER = "run/owner"
DAEMON_RECORD = "run/daemons"


def _which(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """`with Cluster(folder) as c:` starts the daemons; `c.env` is the environment (SLURM_CONF) a client needs."""

    def __init__(self, root: str | Path, start_timeout: float = 120):
        self.root = Path(root).resolve()
        self.start_timeout = start_timeout
        self.host = socket.gethostname().split(".")[0]
        self.pids: dict[str, int] = {}
        self.ports = {k: _free_port() for k in ("ctld", "slurmd", "dbd", "db")}

    # --- can it run here? ------------------------------------------------------------------------------------------
    @staticmethod
    def unavailable() -> str | None:
        """None if a cluster can start here; else why not (one line)."""
        missing = [d for d in DAEMONS if _which(d) is None]
        if missing:
            return f"SLURM not installed ({', '.join(missing)} missing): run `make slurm-deps` (root, Debian)"
        if os.geteuid() != 0:
            return "the loopback SLURM cluster runs its daemons as root (SlurmUser=root)"
        return None

    # --- paths -----------------------------------------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def log(self, name: str) -> str:
        path = MUNGE_LOG if name == "munged" else self.root / "log" / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else "(no log)"

    # --- start / stop ----------------------------------------------------------------------------------------------
    def __enter__(self) -> "Cluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        for sub in ("etc", "log", "state", "spool", "db", "gpu", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        reap_stale(ETC_CONF)
        (self.root / OWNER).write_text(_identity(os.getpid()) + "\n")
        self._link_conf()  # first, so that a process killed while starting leaves its daemons where reap_stale looks
        self._munge()
        self._mariadb()
        self._write_configs()
        self._daemon("slurmdbd", [_which("slurmdbd"), "-D"])  # reads slurmdbd.conf beside $SLURM_CONF
        self._wait(lambda: self._port_open(self.ports["dbd"]), "slurmdbd")
        self._sacctmgr("add", "cluster", "layerswap")
        self._sacctmgr("add", "account", ACCOUNT, "Description=tests", "Organization=layerswap")
        self._sacctmgr("add", "user", "root", f"Account={ACCOUNT}", f"DefaultAccount={ACCOUNT}")
        self._daemon("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: self._port_open(self.ports["ctld"]), "slurmctld")
        self._daemon("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf), "-N", self.host])
        self._wait(self._node_idle, "slurmd (node idle)")

    def _link_conf(self) -> None:
        if ETC_CONF.is_symlink():  # reap_stale leaves a link only where it cannot tell it is a test cluster's
            raise RuntimeError(
                f"{ETC_CONF} links to {os.readlink(ETC_CONF)}, no test cluster's that this code can tell is stale: "
                "remove the link if no SLURM reads it"
            )
        if ETC_CONF.exists():
            raise RuntimeError(f"{ETC_CONF} exists (a real SLURM here?): this test cluster would shadow it")
        ETC_CONF.parent.mkdir(parents=True, exist_ok=True)
        ETC_CONF.symlink_to(self.conf)

    def stop(self) -> None:
        """Stop every daemon this cluster started (TERM, then KILL after 10 s), newest first; unlink the config."""
        if ETC_CONF.is_symlink() and ETC_CONF.resolve() == self.conf:
            ETC_CONF.unlink()
        for pid in reversed(list(self.pids.values())):
            _terminate(pid)
        self.pids.clear()

    # --- daemons ---------------------------------------------------------------------------------------------------
    def _daemon(self, name: str, cmd: list[str], **kw) -> None:
        out = open(self.root / "log" / f"{name}.out", "ab")
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True, **kw)
        self.pids[name] = proc.pid
        identity = _identity(proc.pid)
        if identity:  # for reap_stale, should this process die without stop()
            with open(self.root / DAEMON_RECORD, "a") as f:
                f.write(f"{name} {identity}\n")
        time.sleep(0.2)
        if proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited at start ({proc.returncode}): {self.log(name)} "
                f"{(self.root / 'log' / f'{name}.out').read_text(errors='replace')[-2000:]}"
            )

    def _munge(self) -> None:
        # munged runs as user munge, which cannot reach a folder under root's temporary folders: its key, seed, PID and
        # log go to /run/munge with the socket, at munge's default path (slurm 22.05's accounting clients ignore
        # AuthInfo's socket= and always use it), so one cluster at a time per machine.
        if MUNGE_SOCKET.exists() and subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            raise RuntimeError(f"a munged already answers at {MUNGE_SOCKET} (another cluster running?): stop it first")
        MUNGE_RUN.mkdir(parents=True, exist_ok=True)
        shutil.chown(MUNGE_RUN, "munge", "munge")
        os.chmod(MUNGE_RUN, 0o755)
        key = MUNGE_RUN / "layerswap-test.key"
        key.unlink(missing_ok=True)
        key.write_bytes(os.urandom(1024))
        shutil.chown(key, "munge", "munge")
        os.chmod(key, 0o400)
        cmd = [
            _which("munged"),
            "-F",
            "--key-file",
            str(key),
            "--socket",
            str(MUNGE_SOCKET),
            "--pid-file",
            str(MUNGE_RUN / "layerswap-test.pid"),
            "--log-file",
            str(MUNGE_LOG),
            "--seed-file",
            str(MUNGE_RUN / "layerswap-test.seed"),
            "--force",
        ]
        self._daemon("munged", ["runuser", "-u", "munge", "--", *cmd])
        self._wait(MUNGE_SOCKET.exists, "munged")

    def _mariadb(self) -> None:
        db = self.root / "db"
        sock = db / "mysqld.sock"
        subprocess.run(
            [
                _which("mariadb-install-db"),
                f"--datadir={db / 'data'}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
        )
        self._daemon(
            "mariadbd",
            [
                _which("mariadbd"),
                "--no-defaults",
                f"--datadir={db / 'data'}",
                "--user=root",
                f"--socket={sock}",
                "--bind-address=127.0.0.1",
                f"--port={self.ports['db']}",
                f"--pid-file={db / 'mariadbd.pid'}",
                f"--log-error={self.root / 'log' / 'mariadbd.log'}",
                "--innodb-buffer-pool-size=64M",
                "--skip-log-bin",
            ],
        )
        self._wait(lambda: sock.exists() and self._port_open(self.ports["db"]), "mariadbd")
        sql = (
            "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';"
            "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
            "FLUSH PRIVILEGES;"
        )
        subprocess.run(
            [_which("mariadb") or "mysql", f"--socket={sock}", "-uroot", "-e", sql], check=True, capture_output=True
        )

    def _write_configs(self) -> None:
        r = self.root
        gpus = NODE["gpus"]
        for i in range(gpus):
            dev = r / "gpu" / f"gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device equal to /dev/null
        (r / "etc" / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={r / 'gpu'}/gpu[0-{gpus - 1}]\n")
        dbd = r / "etc" / "slurmdbd.conf"
        dbd.write_text(
            "\n".join(
                [
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={MUNGE_SOCKET}",
                    "DbdHost=localhost",
                    "DbdAddr=127.0.0.1",
                    f"DbdPort={self.ports['dbd']}",
                    "SlurmUser=root",
                    f"LogFile={r / 'log' / 'slurmdbd.log'}",
                    f"PidFile={r / 'run' / 'slurmdbd.pid'}",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1",
                    f"StoragePort={self.ports['db']}",
                    "StorageUser=slurm",
                    "StoragePass=slurm",
                    "StorageLoc=slurm_acct_db",
                    "",
                ]
            )
        )
        os.chmod(dbd, 0o600)
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=layerswap",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    "SlurmUser=root",
                    f"SlurmctldPort={self.ports['ctld']}",
                    f"SlurmdPort={self.ports['slurmd']}",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={MUNGE_SOCKET}",
                    "CredType=cred/munge",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "GresTypes=gpu",
                    "SlurmdParameters=config_overrides",
                    "ReturnToService=2",
                    "MpiDefault=none",
                    # a finished job stays visible to squeue for 5 minutes (the plugin's squeue status needs >= 120 s)
                    "MinJobAge=300",
                    "SchedulerType=sched/backfill",
                    "SchedulerParameters=sched_interval=2",
                    "AccountingStorageType=accounting_storage/slurmdbd",
                    "AccountingStorageHost=127.0.0.1",
                    f"AccountingStoragePort={self.ports['dbd']}",
                    "AccountingStorageEnforce=associations",
                    "JobCompType=jobcomp/none",
                    "KillWait=5",
                    "InactiveLimit=0",
                    "OverTimeLimit=0",
                    f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={NODE['cpus']} RealMemory={NODE['mem_mb']} "
                    f"Gres=gpu:{gpus} State=UNKNOWN",
                    f"PartitionName=cpu Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
                    f"PartitionName=gpu Nodes={self.host} MaxTime={GPU_MAX_TIME} State=UP",
                    "",
                ]
            )
        )

    # --- helpers ---------------------------------------------------------------------------------------------------
    def _sacctmgr(self, *args: str) -> None:
        proc = subprocess.run([_which("sacctmgr"), "-i", *args], env=self.env, capture_output=True, text=True)
        if proc.returncode != 0 and "Nothing new added" not in proc.stdout + proc.stderr:
            raise RuntimeError(f"sacctmgr {' '.join(args)}: {proc.stdout} {proc.stderr}")

    def _node_idle(self) -> bool:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        states = set(proc.stdout.split())  # one line per (node, partition)
        return proc.returncode == 0 and bool(states) and states <= {"idle", "mixed", "allocated"}

    @staticmethod
    def _port_open(port: int) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex(("127.0.0.1", port)) == 0

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for name, pid in self.pids.items():
                if not _alive(pid):
                    raise RuntimeError(f"{name} died while waiting for {what}: {self.log(name)}")
            time.sleep(0.5)
        raise RuntimeError(f"{what} not ready after {self.start_timeout:.0f} s")


def run_records() -> tuple[str, ...]:
    """Files of a results tree whose bytes depend on wall-clock time or on the executor, not on what was computed.
    (Imported here, not at the top: `make slurm-deps` runs this file with the system Python, before any venv.)"""
    from layerswap.layout import LOGS, Layout

    return (f"{LOGS}/", Layout().relative(Layout().manifest()), "log.jsonl")


def run_record_folders() -> tuple[str, ...]:
    """Folders of a results tree that record how the run went, not what it computed: the logs; the hash cache (keyed
    by inode and mtime); which results a retried job copied from the store (a requeued job reuses its first try's)."""
    from layerswap.layout import LOGS, STORE

    return (f"{LOGS}/", f"{STORE}/hashes/", f"{STORE}/fed/")


def differing(a: Path, b: Path) -> list[str]:
    """Files of two results trees that are missing on one side or differ in bytes, run records aside."""
    records, folders = run_records(), run_record_folders()
    files = {p.relative_to(root).as_posix() for root in (a, b) for p in root.rglob("*") if p.is_file()}
    out = []
    for rel in sorted(files):
        if rel.startswith(folders) or rel.endswith(records[1:]):
            continue
        pa, pb = a / rel, b / rel
        if not (pa.is_file() and pb.is_file()) or pa.read_bytes() != pb.read_bytes():
            out.append(rel)
    return out


def reap_stale(link: Path) -> None:
    """Clear what a test cluster killed before it could stop left behind: its config link at `link` (ETC_CONF) and
    its daemons, which run in sessions of their own and outlive it. A cluster is stale when the process that started
    it (its OWNER record) is gone; a link into a live cluster's folder is refused (one cluster per machine: munge's
    socket and ETC_CONF are fixed paths); a real file at `link` is left for _link_conf to refuse."""
    if not link.is_symlink():
        return
    root = Path(os.readlink(link)).parent.parent  # <root>/etc/slurm.conf
    owner = root / OWNER
    if owner.is_file():
        identity = owner.read_text().strip()
        if _running(identity):
            raise RuntimeError(
                f"{link} links to the test cluster in {root}, whose process {identity.split()[0]} is running: "
                "stop it first"
            )
        record = root / DAEMON_RECORD
        for line in (record.read_text().splitlines() if record.is_file() else [])[::-1]:
            name, identity = line.split(" ", 1)
            if _running(identity):
                pid = int(identity.split()[0])
                print(f"stopping {name} (pid {pid}), left running by the test cluster in {root}", file=sys.stderr)
                _terminate(pid, os.killpg)  # the group it leads (start_new_session): munged under runuser too
    elif link.exists():
        return  # not a test cluster's link: _link_conf refuses it
    link.unlink()


def _identity(pid: int) -> str | None:
    """The record "PID START" of a running process; None for one that is gone (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3, start time field 22
    return None if fields[0] == "Z" else f"{pid} {fields[19]}"


def _running(identity: str) -> bool:
    """Whether the process of a record "PID START" still runs (not another one that took its PID)."""
    return _identity(int(identity.split()[0])) == identity


def _terminate(pid: int, send=os.kill) -> None:
    """TERM, then KILL after 10 s, until it is gone; `send`: os.kill (the process) or os.killpg (the group it leads)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            send(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if not _alive(pid):
            return


def _alive(pid: int) -> bool:
    """Running: neither gone nor a zombie (a daemon's Popen object, or init for an orphan, reaps it)."""
    return _identity(pid) is not None


if __name__ == "__main__":  # manual use: python scripts/slurm_cluster.py <folder>; Ctrl-C stops it
    if sys.argv[1:] == ["--installed"]:  # for `make slurm-deps`: exit 0 if the daemons are installed
        sys.exit(0 if all(_which(d) for d in DAEMONS) else 1)
    reason = Cluster.unavailable()
    if reason:
        sys.exit(reason)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the daemons too
    with Cluster(sys.argv[1]) as c:
        print(f"export SLURM_CONF={c.conf}", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
