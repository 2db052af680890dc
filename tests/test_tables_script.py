"""scripts/tables.sh: the paper's table rows task by task through `runner.py --protocol table5` (dry runs only)."""

import os
import subprocess

from analysis import paper_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tables(*args, tasks=None, cs=None, **knobs):
    env = {**os.environ, **({"TASKS": tasks} if tasks else {}), **({"CS": cs} if cs else {}), **knobs}
    return subprocess.run(["bash", "scripts/tables.sh", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def test_bad_first_argument_is_one_line_error():
    out = tables("tabel7")
    assert out.returncode == 2 and out.stderr.strip() == \
        "tables.sh: first argument must be dmc, cw, all or table7, got 'tabel7'"


def test_causalworld_sources_per_task_and_table7_feature_sets():
    out = tables("cw", "--dry-run", tasks="towers general creative_stacked_blocks")
    assert out.returncode == 0, out.stderr
    assert "--out data/cw_towers_t5.npz --seed 0 --cw.episodes 600 --expert-episodes 13 --cw.expert scripted" in out.stdout
    assert "--out data/cw_general_t5.npz --seed 0 --cw.episodes 600 --expert-episodes 12 --cw.expert scripted" in out.stdout
    assert ("--out data/cw_creative_stacked_blocks_t5.npz --seed 0 --cw.episodes 600 --expert-episodes 14 "
            "--cw.expert scripted") in out.stdout  # its fixed structure (cw_env.STRUCTURES) with the scripted source
    assert out.stdout.count("runner: jobs named augment* oilca* run alone (--solo)") == 2  # towers and general
    out = tables("cw", "--dry-run", tasks="stacked_blocks")  # 834-step episodes, stored to be memory-mapped
    assert "--cw.expert scripted --cw.episode-len 834 --uncompressed" in out.stdout, out.stderr
    assert "runner: jobs named augment* run alone (--solo)" in out.stdout  # OILCA, memory-mapped, two at a time
    out = tables("cw", "--dry-run", tasks="pushing")  # no --solo (an empty array under set -u still runs)
    assert out.returncode == 0 and "run alone" not in out.stdout and "cw_pushing_t5.npz" in out.stdout, out.stderr
    out = tables("table7", "--dry-run", tasks="picking")
    collects = [line for line in out.stdout.splitlines() if " collect " in line]
    assert [c.split("--out data/")[1].split(".npz")[0] for c in collects] == [f"cw_picking_t5-c{c}" for c in (1, 2, 4, 5)]
    assert collects[0].endswith("--cw.features stage_friction --force")
    assert collects[3].endswith("--cw.features stage_color stage_friction floor_friction block_color block_mass --force")
    for line, c in zip(collects, (1, 2, 4, 5)):  # the feature sets come from the transcribed paper, nowhere else
        assert line.endswith(f"--cw.features {' '.join(paper_results.FEATURE_SETS[c])} --force")
    assert "oilca_s4" in out.stdout and "dwbc_s0" not in out.stdout


def test_cw_workers_knob_reaches_every_causalworld_collection_and_only_when_set():
    def collect_lines(**knobs):
        out = tables("cw", "--dry-run", tasks="towers pushing", **knobs)
        assert out.returncode == 0, out.stderr
        return {line.split("--out data/")[1].split("_t5.npz")[0]: line for line in out.stdout.splitlines()
                if " collect " in line}

    lines = collect_lines(CW_WORKERS="2")
    assert lines["cw_towers"].endswith("--cw.expert scripted --cw.workers 2 --force")
    assert lines["cw_pushing"].endswith("--cw.workers 2 --force")
    assert all("--cw.workers" not in line for line in collect_lines().values())  # finished rows keep their command


def test_table7_feature_set_subset():
    """CS picks Table 7's feature sets (e.g. only C = 5 of pushing); anything but 1, 2, 4, 5 is a one-line error."""
    out = tables("table7", "--dry-run", tasks="pushing", cs="5")
    collects = [line for line in out.stdout.splitlines() if " collect " in line]
    assert out.returncode == 0 and len(collects) == 1 and "--out data/cw_pushing_t5-c5.npz" in collects[0]
    out = tables("table7", "--dry-run", tasks="pushing", cs="5 3")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.strip() == \
        "tables.sh: CS must list feature sets among 1 2 4 5 (3 is Table 2's own runs), got '3'"
