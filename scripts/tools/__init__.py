"""The repository's check tools, run from the repository root as `python -m scripts.tools.<name>` (`--help` gives the
options), and read by the tests:

- `dry_run_jobs`: every config's dry run as sorted jobs (rule, files, shell command), for `diff -r` between two
  commits: a refactor that changes no job leaves the two folders equal;
- `structure_counts`: where a results path is spelled, the members of the rules' `Spec`, import cycles and upward
  imports (tests/test_imports.py checks docs/ARCHITECTURE.md's layers with it);
- `readme_summary`: the README's "what the toy world shows" paragraph against a run's `summary.md` (`--write`
  updates it; tests/test_intervals.py);
- `fault_drill`: the fault drills of docs/REPAIR.md and docs/SECURITY.md on the micro config (a package: the drills
  of issue 30 in `repairs`, of issue 43 in `hostile`, what they share in `runs`).
"""
