"""`python -m layerswap.schema_blocks`: rewrite the generated blocks of config/schema.yaml.

The schema file stands alone (snakemake.utils.validate reads it), and the parts that list registered things are
generated between markers from their owners: the merge methods (`layerswap.merge.schema.schema_block`, from the method
registry) and the benchmarks (`layerswap.benchmarks.schema_block`); tests/test_config.py and tests/test_benchmarks.py
check that the copies are current. Nothing imports this module, so no command's code fingerprint depends on it.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[1] / "config" / "schema.yaml"


def rewrite(path: str | Path, begin: str, end: str, block: str) -> None:
    """Replace the text from the line `begin` to the line `end` of the file at `path` by `block`."""
    text = Path(path).read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{path}: no '{begin.strip()}' ... '{end.strip()}' block")
    head, rest = text.split(begin, 1)
    Path(path).write_text(head + block + rest.split(end, 1)[1])


def main(path: str | Path = SCHEMA) -> None:
    from layerswap import benchmarks
    from layerswap.merge import schema

    rewrite(path, benchmarks.BEGIN, benchmarks.END, benchmarks.schema_block())
    rewrite(path, schema.BEGIN, schema.END, schema.schema_block())


if __name__ == "__main__":
    main()
