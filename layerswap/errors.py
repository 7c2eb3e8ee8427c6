"""The one exception type for bad user input, and the one-line form of the errors a user can fix on their side
(full disk, permissions, read-only file system, missing file, a file that is not UTF-8 or not YAML)."""

from __future__ import annotations

import errno
import sys


class UserError(Exception):
    """Bad input from the user (config, file, tensor): reported as one line naming what is at fault."""


#: What to do about an operating-system error, by errno (the strerror says what happened).
OS_HINTS: dict[int, str] = {
    errno.ENOSPC: "free space there (or point the results at a larger disk) and run again",
    errno.EDQUOT: "free space within your quota and run again",
    errno.EROFS: "write the outputs to a writable location",
    errno.EACCES: "check the owner and mode of the file and its folder",
    errno.EPERM: "check the owner and mode of the file and its folder",
    errno.ENOENT: "check the path",
}


def one_line(err: BaseException) -> str | None:
    """One line naming the file (where the error knows it) and the cause of an OSError, UnicodeDecodeError or YAML
    error; None for any other exception (a bug: its traceback is worth more than a line)."""
    if isinstance(err, OSError):
        code = errno.errorcode.get(err.errno or 0)
        cause = (err.strerror or str(err)) + (f" ({code})" if code else "")
        hint = OS_HINTS.get(err.errno or 0)
        target = "" if err.filename is None else f"{err.filename}: "
        if err.filename2 is not None:
            target = f"{err.filename} -> {err.filename2}: "
        return target + cause + (f"; {hint}" if hint else "")
    if isinstance(err, UnicodeDecodeError):
        return (
            f"a file is not UTF-8 text ({err.reason}: byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "save it as UTF-8"
        )
    yaml = sys.modules.get("yaml")  # a YAML error can only come from an imported yaml
    if yaml is not None and isinstance(err, yaml.YAMLError):
        mark = getattr(err, "problem_mark", None)
        return f"{mark.name if mark is not None else 'a file'} {yaml_problem(err)}"
    return None


def yaml_problem(err: Exception) -> str:
    """Where and what of a YAML parse error: 'line L column C: not valid YAML (<problem>)' (no position if unknown)."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
    return f"{where}not valid YAML ({getattr(err, 'problem', None) or str(err).splitlines()[0]})"
