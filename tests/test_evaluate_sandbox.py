"""The sandbox that runs model-written MBPP code (only with execute_code: true)."""

from __future__ import annotations

import time

from layerswap.evaluation.sandbox import network_isolation, run_program


def test_correct_solution_passes_and_wrong_fails():
    code = "def f ( x ) : return x + 3"
    tests = "assert f ( 4 ) == 7\nassert f ( 1 ) == 4"
    assert run_program(f"{code}\n{tests}").passed
    bad = run_program(f"def f ( x ) : return x - 3\n{tests}")
    assert not bad.passed and bad.status == "failed" and "AssertionError" in bad.stderr_tail


def test_infinite_loop_times_out():
    t = time.perf_counter()
    out = run_program("while True:\n    pass", timeout=1.0)
    assert out.status == "timeout" and not out.passed
    assert time.perf_counter() - t < 60  # killed at its timeout (a hang guard: the load cannot reach it)


def test_network_is_refused():
    assert network_isolation() in {"unshare -rn", "audit-hook"}
    src = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "s.settimeout(1)\n"
        "s.connect(('127.0.0.1', 9))\n"
    )
    out = run_program(src, timeout=5.0)
    assert not out.passed and out.status == "failed"
    assert "sandbox: socket" in out.stderr_tail  # the audit hook refuses before any packet is sent


def test_no_process_spawning_and_memory_cap():
    assert not run_program("import os\nos.system('true')").passed
    assert not run_program("import subprocess\nsubprocess.run(['true'])").passed
    out = run_program("x = bytearray(4 * 1024 ** 3)")
    assert not out.passed and "MemoryError" in out.stderr_tail


def test_runs_in_empty_temp_dir_with_clean_env():
    assert run_program(
        "import os\nassert os.listdir('.') == []\nassert not any('proxy' in k.lower() for k in os.environ)"
    ).passed


def test_mbpp_execute_filter_and_metric():
    from layerswap.tasks.toy import utils  # namespace-package import of the task helpers

    doc = {"test_setup_code": "", "test_list": ["assert f ( 2 ) == 6", "assert f ( 3 ) == 9"]}
    gens = [["def f ( x ) : return x * 3"], ["def f ( x ) : return x + 3"], [""]]
    outcomes = utils.mbpp_execute(gens, [doc, doc, doc])
    assert outcomes == [["passed"], ["failed"], ["failed"]]
    assert [utils.mbpp_process_results(doc, o)["pass_at_1"] for o in outcomes] == [1.0, 0.0, 0.0]
