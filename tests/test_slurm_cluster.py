"""The loopback SLURM of tests/test_slurm.py clears what a cluster killed before it could stop left behind
(scripts/slurm_cluster.py `reap_stale`): its config link and its daemons, so that a run killed mid-suite does not stop
the next one's cluster; a live cluster's link and a real SLURM config are left alone. Needs neither root nor SLURM:
the link is made in a temporary folder."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scripts.slurm_cluster import DAEMON_RECORD, OWNER, _identity, reap_stale


def cluster_folder(tmp_path: Path, owner: str) -> tuple[Path, Path]:
    """A test cluster's folder (its config and its owner record) and a link to its config, as ETC_CONF would be."""
    root = tmp_path / "slurm0"
    (root / "etc").mkdir(parents=True)
    (root / "run").mkdir()
    (root / "etc" / "slurm.conf").write_text("ClusterName=layerswap\n")
    (root / OWNER).write_text(owner + "\n")
    link = tmp_path / "etc-slurm" / "slurm.conf"
    link.parent.mkdir()
    link.symlink_to(root / "etc" / "slurm.conf")
    return root, link


def test_a_dead_owners_link_and_daemons_are_cleared(tmp_path):
    daemon = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        # the owner's PID is this process's, with another start time: a PID reused by another process is not the owner
        pid = os.getpid()
        root, link = cluster_folder(tmp_path, f"{pid} {int(_identity(pid).split()[1]) + 1}")
        (root / DAEMON_RECORD).write_text(f"slurmctld {_identity(daemon.pid)}\n")
        reap_stale(link)
        assert daemon.wait(timeout=15) != 0  # stopped by a signal
        assert not link.is_symlink()
        assert (root / "etc" / "slurm.conf").is_file()  # the cluster's own files are left for pytest's tmp clean-up
    finally:
        daemon.kill()
        daemon.wait()


def test_a_recorded_pid_now_held_by_another_process_is_not_killed(tmp_path):
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        root, link = cluster_folder(tmp_path, "999999999 1")
        start = int(_identity(bystander.pid).split()[1])
        (root / DAEMON_RECORD).write_text(f"munged {bystander.pid} {start + 1}\n")
        reap_stale(link)
        assert bystander.poll() is None
        assert not link.is_symlink()
    finally:
        bystander.kill()
        bystander.wait()


def test_a_live_clusters_link_is_refused_and_kept(tmp_path):
    root, link = cluster_folder(tmp_path, _identity(os.getpid()))
    with pytest.raises(RuntimeError, match=f"test cluster in {root}, whose process {os.getpid()} is running"):
        reap_stale(link)
    assert link.is_symlink()


def test_a_dangling_link_is_removed(tmp_path):
    link = tmp_path / "slurm.conf"
    link.symlink_to(tmp_path / "gone" / "etc" / "slurm.conf")
    reap_stale(link)
    assert not link.is_symlink()


def test_a_real_slurm_config_is_left(tmp_path):
    real = tmp_path / "site" / "etc" / "slurm.conf"
    real.parent.mkdir(parents=True)
    real.write_text("ClusterName=site\n")
    link = tmp_path / "slurm.conf"
    link.symlink_to(real)
    plain = tmp_path / "plain.conf"
    plain.write_text("ClusterName=site\n")
    for path in (link, plain):
        reap_stale(path)
    assert link.is_symlink() and plain.read_text() == real.read_text() == "ClusterName=site\n"
