"""Command-line parsing shared by every script: tyro, with its parse errors as one line.

tyro prints a bad flag (a wrong type, a value outside a Literal's choices, an unknown option, a missing argument) as a
framed, multi-line panel. The project's rule is one line on stderr naming the flag and the problem, so `parse` runs
tyro with its output captured and, when tyro refuses the command line, prints the panel's text on one line:

    error: invalid choice 'd.npz' for argument '--data'. Expected one of ('expert', 'all').

and exits with status 2 (argparse's status for a usage error). `--help` and `-h` pass through untouched.
`run(main, Args)` is a script's whole `__main__`: parse, call main, and print a refusal (a ValueError: a bad value, a
bad file) or an exhausted memory as one `error: …` line with status 1.
"""

import contextlib
import errno
import io
import os
import re
import sys
from typing import Callable, Optional, Sequence, Tuple, Type, TypeVar

import tyro

T, R = TypeVar("T"), TypeVar("R")


def unwrap(text: str) -> str:
    """A docstring as --help shows it: the lines of a paragraph joined into one (the source keeps its lines under
    120 characters; the terminal wraps them again), paragraphs and bullet lines (`*`, `-`) kept apart."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = [line.strip() for line in para.splitlines() if line.strip()]
        joined = ""
        for line in lines:
            bullet = line.startswith(("* ", "- ", "• "))
            joined += ("\n" if bullet and joined else " " if joined else "") + line
        out.append(joined)
    return "\n\n".join(out)


try:  # tyro keeps a docstring's line break wherever the next line does not start with a letter (an indent, a `)
    from tyro import _strings as _tyro_strings

    _tyro_strings.remove_single_line_breaks = unwrap
except (ImportError, AttributeError):  # another tyro: its own line handling
    pass
FRAME = "╭╮╰╯│─┃━┏┓┗┛"  # the panel's border characters (rich's rounded and heavy boxes)


def one_line(panel: str) -> str:
    """The message of a tyro error panel on one line: its body's first section. On a terminal rich draws a box with
    the title in the top border; elsewhere it prints the title, a rule of dashes, the body, another rule and the
    flag's helptext. Sections are split at rules; the title stands in where there is no body."""
    lines = [raw.strip() for raw in panel.splitlines() if raw.strip()]
    title = lines.pop(0).strip(FRAME + " -") if lines else ""
    sections, current = [], []
    for line in lines:
        if line.startswith(("╰", "┗")):
            break
        text = line.strip(FRAME + " ")
        if not text.strip("-"):  # a rule
            sections.append(current)
            current = []
        else:
            current.append(text)
    sections = [s for s in sections + [current] if s]
    body = sections[0] if sections else []
    message = re.sub(r"\s+", " ", " ".join(body) or title).strip()
    return message or "could not parse the command line"


def parse(cls: Type[T], args: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> T:
    """tyro.cli(cls); a refused command line prints `error: <one line>` on stderr and exits with status 2."""
    argv = list(sys.argv[1:] if args is None else args)
    if "-h" in argv or "--help" in argv:
        return tyro.cli(cls, args=argv, prog=prog)
    captured = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"  # rich wraps the panel at the terminal width; a wide one keeps words whole
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            return tyro.cli(cls, args=argv, prog=prog)
    except SystemExit as e:
        if e.code in (0, None):
            sys.stdout.write(captured.getvalue())
            raise
        print(f"error: {one_line(captured.getvalue())}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


def out_of_memory(e: BaseException) -> bool:
    """numpy's and Python's MemoryError, torch's CPU allocator failure and CUDA's OutOfMemoryError."""
    return isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError" or \
        (isinstance(e, RuntimeError) and "can't allocate memory" in str(e))


def run(main: Callable[[T], R], cls: Type[T], refused: Tuple[Type[BaseException], ...] = (ValueError,)) -> R:
    """A script's `__main__`: parse (above), call main, and stop with one `error: …` line (status 1) on a refusal
    (`refused`: ValueError, which contract.ContractError is, unless the script names more) or when memory runs out
    (a --batch-size or a dataset too large for this machine), instead of a traceback."""
    args = parse(cls)
    try:
        return main(args)
    except refused as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:  # SIGINT, or SIGTERM where contract.all_or_nothing turned it into one
        print("error: stopped by a signal (SIGINT or SIGTERM) before it finished", file=sys.stderr)
        sys.exit(130)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {e.filename}" if e.filename else ""
        sys.exit(f"error: no space left on the device{where}; free some space and run it again")
    except (MemoryError, RuntimeError) as e:
        if not out_of_memory(e):
            raise
        sys.exit(f"error: out of memory ({short(str(e)) or type(e).__name__}): lower --batch-size, or use a machine "
                 f"with more memory")


def cpu_cores() -> int:
    """The cores this process may run on: a container's or taskset's share where the OS tells it (Linux), else every
    core of the machine (macOS, Windows have no os.sched_getaffinity)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def short(message: str, limit: int = 200) -> str:
    """The last line of an exception's message, cut after its last full sentence within `limit` characters (torch's
    CUDA message runs to 600 characters of allocator advice)."""
    text = message.strip().splitlines()[-1].strip() if message.strip() else ""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = cut.rfind(". ")
    return cut[:end + 1] if end > 0 else cut.rstrip() + "…"
