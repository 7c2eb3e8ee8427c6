"""Check (default) or update (--write) the README's "what the toy world shows" paragraph against a run's summary.

    python -m scripts.tools.readme_summary [--results results] [--readme README.md] [--write]

The paragraph between the README's summary markers (layerswap.report.summary.README_BEGIN / README_END) must be the
paragraph of <results>/tables/summary.md, which `layerswap tables` writes from the run's tables (the README's comes
from the default run, `make run`). Exit 1, printing both texts, where they differ; --write puts the run's paragraph
into the README instead.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from layerswap.layout import Layout, R
from layerswap.report.summary import README_BEGIN, README_END, paragraph

REPO = Path(__file__).resolve().parents[2]


def split(readme: str) -> tuple[str, str, str]:
    """(before, paragraph, after) around the markers; exactly one pair of markers."""
    if readme.count(README_BEGIN) != 1 or readme.count(README_END) != 1:
        raise SystemExit(f"README: needs exactly one '{README_BEGIN}' and one '{README_END}' line")
    before, rest = readme.split(README_BEGIN, 1)
    inside, after = rest.split(README_END, 1)
    return before, inside.strip(), after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=REPO / R, help="a finished run's results/")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    parser.add_argument("--write", action="store_true", help="put the run's paragraph into the README")
    args = parser.parse_args(argv)
    source = Path(Layout.at(args.results).table("summary", "md"))
    if not source.is_file():
        print(f"{source}: missing (run the workflow first: `make run`)", file=sys.stderr)
        return 1
    generated = paragraph(source.read_text())
    before, current, after = split(args.readme.read_text())
    if current.split() == generated.split():  # the README wraps the paragraph
        print(f"{args.readme}: the summary paragraph matches {source}")
        return 0
    if args.write:
        wrapped = textwrap.fill(generated, width=118, break_long_words=False, break_on_hyphens=False)
        args.readme.write_text(f"{before}{README_BEGIN}\n{wrapped}\n{README_END}{after}")
        print(f"{args.readme}: summary paragraph updated from {source}")
        return 0
    print(
        f"{args.readme}: the summary paragraph differs from {source}\n--- README\n{current}\n--- run\n{generated}",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
