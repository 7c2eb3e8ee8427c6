"""`layerswap <command>`: the one entry point the Snakemake rules call.

Only the module of the requested command is imported, so light commands (tables, select) do not pay for
torch/transformers/lm-eval start-up.

Errors a user can act on are one line on stderr and exit status 1: a `UserError` (bad input), and an operating-system
error (disk full, permission denied, read-only file system, missing file), a file that is not UTF-8 or not YAML
(`layerswap.errors.one_line`). `layerswap --debug <command> ...` (or `LAYERSWAP_DEBUG=1`) adds the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from layerswap.commands import COMMANDS
from layerswap.errors import UserError, one_line

#: Set to 1 (or give `--debug` before the command) for the traceback behind a one-line error.
DEBUG_ENV = "LAYERSWAP_DEBUG"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    if argv and argv[0] == "--debug":
        debug, argv = True, argv[1:]
    if argv and argv[0] not in COMMANDS and argv[0] not in {"-h", "--help"}:
        import difflib

        near = difflib.get_close_matches(argv[0], list(COMMANDS), n=1)
        print(
            f"layerswap: error: unknown command '{argv[0]}'"
            + (f" (did you mean '{near[0]}'?)" if near else "")
            + "; `layerswap --help` lists the commands",
            file=sys.stderr,
        )
        return 2
    if not argv or argv[0] in {"-h", "--help"}:
        lines = [f"  {name:<13} {help_}" for name, (_, help_) in COMMANDS.items()]
        print(
            "usage: layerswap [--debug] <command> [options]\n\ncommands:\n"
            + "\n".join(lines)
            + f"\n\n--debug (or {DEBUG_ENV}=1): show the traceback behind a one-line error",
            file=sys.stderr,
        )
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    try:  # importing the command runs its modules' declarations (a bad registry entry is a UserError too)
        module = importlib.import_module(COMMANDS[name][0])
        parser = argparse.ArgumentParser(prog=f"layerswap {name}", description=COMMANDS[name][1])
        module.add_arguments(parser)
        args = parser.parse_args(rest)
        module.run(args)
    except UserError as err:  # one clear line, no traceback, for bad input
        return _report(name, str(err), debug, hint=False)
    except Exception as err:  # noqa: BLE001 - only the kinds one_line knows; anything else is a bug: re-raised
        line = one_line(err)
        if line is None:
            raise
        return _report(name, line, debug, hint=True)
    return 0


def _report(name: str, line: str, debug: bool, hint: bool) -> int:
    if debug:
        traceback.print_exc()
    elif hint:
        line += f" (traceback: layerswap --debug {name} ..., or {DEBUG_ENV}=1)"
    print(f"layerswap {name}: error: {line}", file=sys.stderr)
    return 1


def exit_fast(code: int) -> None:
    """Exit without interpreter teardown: after torch + lm-eval it costs 1-2 s per job, and every output file
    is already closed and renamed into place by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def entry() -> None:
    """Console-script entry point."""
    exit_fast(main())


if __name__ == "__main__":
    entry()
