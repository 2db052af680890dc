"""cli.parse: tyro's parse errors become one `error: …` line (status 2); valid command lines and --help pass through."""
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Literal

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oilca import cli  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Args:
    data: Literal["expert", "all"] = "expert"
    """which rows"""
    lr: float = 1e-4
    """learning rate"""


BOXED = """╭─ Invalid choice ─────────────────────────────────────╮
│ invalid choice 'd.npz' for argument '--data'.        │
│ Expected one of ('expert', 'all').                   │
│ ──────────────────────────────────────────────────── │
│ For full helptext, run train_bc.py --help            │
╰──────────────────────────────────────────────────────╯
"""
PLAIN = """ Value error
 ----------------------------------------
  Error parsing --lr: could not convert string to float: 'abc'
  ----------------------------------------
  Argument helptext:
      --lr FLOAT
  ----------------------------------------
  For full helptext, see train_bc.py --help
"""


def test_one_line_keeps_the_body_of_both_panel_styles_and_drops_the_helptext():
    assert cli.one_line(BOXED) == "invalid choice 'd.npz' for argument '--data'. Expected one of ('expert', 'all')."
    assert cli.one_line(PLAIN) == "Error parsing --lr: could not convert string to float: 'abc'"
    assert cli.one_line("╭─ Missing argument ─╮\n╰────────────────────╯\n") == "Missing argument"  # no body: the title
    assert cli.one_line("") == "could not parse the command line"


@pytest.mark.parametrize("argv, words", [(["--data", "d.npz"], ["--data", "'d.npz'", "expert"]),
                                         (["--lr", "abc"], ["--lr", "abc"]),
                                         (["--bogus", "1"], ["--bogus"]),
                                         (["--data"], ["--data"])])
def test_parse_refuses_with_one_line_and_status_2(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        cli.parse(Args, argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert all(w in err for w in words), err


def test_parse_passes_valid_flags_and_help_through(capsys):
    assert cli.parse(Args, ["--data", "all", "--lr", "0.5"]) == Args("all", 0.5)
    with pytest.raises(SystemExit) as e:
        cli.parse(Args, ["--help"])
    assert e.value.code in (0, None) and "--lr" in capsys.readouterr().out


def test_a_script_refuses_a_bad_choice_on_one_stderr_line_in_a_real_process():
    """A real process: stderr is one line whatever rich decides about the terminal, and the exit status is 2."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "train_bc.py"), "--data", "d.npz"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["error: invalid choice 'd.npz' for argument '--data'. Expected one of "
                                        "('expert', 'all')."]


def test_run_turns_refusals_and_exhausted_memory_into_one_line_and_reraises_other_errors(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["x.py", "--lr", "0.5"])

    def refuse(args):
        raise ValueError(f"--lr must be small, got {args.lr}")

    def numpy_oom(args):
        raise MemoryError("Unable to allocate 7.28 TiB for an array with shape (1000000000000,)")

    def torch_oom(args):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried")

    def cuda_oom(args):
        import torch  # the class exists on CPU builds too, so this branch is tested without a GPU
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

    def bug(args):
        raise RuntimeError("shape mismatch")

    assert cli.run(lambda a: a.lr * 2, Args) == 1.0
    for main, words in ((refuse, ["--lr must be small, got 0.5"]), (numpy_oom, ["out of memory", "7.28 TiB", "--batch-size"]),
                        (torch_oom, ["out of memory", "can't allocate memory"]),
                        (cuda_oom, ["out of memory", "Tried to allocate 80.00 GiB"])):
        with pytest.raises(SystemExit) as e:
            cli.run(main, Args)
        message = str(e.value.code)  # sys.exit(text): Python prints it on stderr with status 1
        assert message.startswith("error: ") and "\n" not in message and all(w in message for w in words), message
    cuda = ("CUDA out of memory. Tried to allocate 59604.65 GiB. GPU 0 has a total capacity of 79.18 GiB of which 78.66 "
            "GiB is free. Including non-PyTorch memory, this process has 520.00 MiB memory in use. Of the allocated memory "
            "266.00 KiB is allocated by PyTorch")  # an H100's message, 2026-11-27
    assert cli.short(cuda) == ("CUDA out of memory. Tried to allocate 59604.65 GiB. GPU 0 has a total capacity of 79.18 "
                               "GiB of which 78.66 GiB is free. Including non-PyTorch memory, this process has 520.00 MiB "
                               "memory in use.")  # cut after the last sentence that ends within 200 characters
    assert cli.short("x" * 300) == "x" * 200 + "…" and cli.short("a\nb. c") == "b. c" and cli.short("") == ""
    with pytest.raises(RuntimeError, match="shape mismatch"):  # a bug stays a traceback
        cli.run(bug, Args)
    with pytest.raises(KeyError):
        cli.run(lambda a: {}["k"], Args)  # not refused unless the script names it
    with pytest.raises(SystemExit):
        cli.run(lambda a: {}["k"], Args, refused=(ValueError, KeyError))


def test_run_turns_a_signal_and_a_full_disk_into_one_line(monkeypatch, capsys):
    import errno

    monkeypatch.setattr(sys, "argv", ["x.py"])

    def interrupted(args):
        raise KeyboardInterrupt

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "data/toy.npz.tmp")

    def other(args):
        raise OSError(errno.EACCES, "Permission denied", "x")

    with pytest.raises(SystemExit) as e:
        cli.run(interrupted, Args)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 130 and len(err) == 1 and err[0].startswith("error: stopped by a signal")
    with pytest.raises(SystemExit) as e:
        cli.run(full, Args)
    assert str(e.value.code) == ("error: no space left on the device writing data/toy.npz.tmp; free some space and run "
                                 "it again")
    with pytest.raises(PermissionError):  # other OS errors are not hidden
        cli.run(other, Args)
