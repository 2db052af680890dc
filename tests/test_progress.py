"""progress.py: at most one line per `every_s` (and always the last step), a progress.csv flushed row by row,
TensorBoard event files; and the stages write their rows through it as they go."""
import csv
import glob
import io
import os

import pytest

from oilca.progress import Progress


def lines(stream: io.StringIO):
    return stream.getvalue().splitlines()


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def as_csv(rows):
    """Rows as csv.DictReader gives them back: every value as its str (floats round-trip through repr)."""
    return [{k: str(v) for k, v in r.items()} for r in rows]


def test_a_line_at_most_every_every_s_and_always_the_last_step():
    out = io.StringIO()
    prog = Progress("t", total=10, every_s=0, stream=out)
    assert all(prog.update(step, {"loss": 1.0 / step}) for step in range(1, 11))  # every_s=0: a line every step
    assert len(lines(out)) == 10
    assert lines(out)[4].startswith("[t] step 5/10 (50%)  ") and "steps/s  ETA " in lines(out)[4]
    assert lines(out)[4].endswith("loss 0.2") and "ETA 0s" in lines(out)[-1]

    out, calls = io.StringIO(), []
    prog = Progress("t", total=10, every_s=1e9, stream=out)

    def scalars():
        calls.append(1)
        return {"loss": 0.5}

    printed = [prog.update(step, scalars) for step in range(1, 11)]
    assert printed == [False] * 9 + [True] and len(lines(out)) == 1  # only the last step
    assert lines(out)[0].startswith("[t] step 10/10 (100%)") and "steps/s" in lines(out)[0] and "ETA" in lines(out)[0]
    assert len(calls) == 1  # the scalars (a loss's .item()) are read only for a printed line
    assert prog.update(3, {"eval_return": 1.5}, force=True) and lines(out)[-1].endswith("eval_return 1.5")


def test_a_resumed_run_counts_only_its_own_steps():
    prog = Progress("t", total=1000, start=900, stream=io.StringIO())
    prog.t0 -= 10.0  # 10 s since this process started, 100 steps done in it
    assert prog.rate(1000) == pytest.approx(10.0, rel=0.01)
    assert prog.line(950, {}) == "[t] step 950/1000 (95%)  5 steps/s  ETA 10s"  # 50 steps in 10 s, 50 to go


def test_a_slow_rate_keeps_two_significant_digits():
    """CausalWorld collection runs well under one episode per second: the line reads 0.42 episodes/s, not 0."""
    prog = Progress("c", total=600, unit="episodes", stream=io.StringIO())
    prog.t0 -= 100.0
    assert prog.line(42, {}).startswith("[c] step 42/600 (7%)  0.42 episodes/s  ETA ")
    fast = Progress("c", total=600, unit="episodes", stream=io.StringIO())
    fast.t0 -= 10.0
    assert fast.line(123, {}).startswith("[c] step 123/600 (20%)  12 episodes/s  ETA ")  # from 10 on: no decimals


def test_csv_rows_are_on_disk_before_close(tmp_path):
    prog = Progress("t", total=10, out_dir=str(tmp_path / "run"), stream=io.StringIO())
    assert not (tmp_path / "run").exists()  # nothing is written before the first row
    prog.log({"step": 1, "loss": 0.25, "eval_return": ""})
    assert csv_rows(tmp_path / "run" / "progress.csv") == [{"step": "1", "loss": "0.25", "eval_return": ""}]
    prog.log({"step": 2, "loss": 0.125, "eval_return": -3.5})
    assert len(csv_rows(tmp_path / "run" / "progress.csv")) == 2  # flushed: readable while the run goes on
    prog.close()
    assert csv_rows(tmp_path / "run" / "progress.csv")[1] == {"step": "2", "loss": "0.125", "eval_return": "-3.5"}


def test_tensorboard_event_files(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    prog = Progress("t", total=4, out_dir=str(tmp_path), tensorboard=True, every_s=0, stream=io.StringIO())
    for step in range(1, 5):
        prog.update(step, {"loss": float(step)})
    prog.log({"step": 4, "loss": 0.5, "eval_return": 2.0})
    prog.close()
    events = glob.glob(str(tmp_path / "tb" / "events.out.tfevents.*"))
    assert len(events) == 1 and os.path.getsize(events[0]) > 0
    acc = EventAccumulator(str(tmp_path / "tb")).Reload()
    # one tag per scalar, each step once (the line at step 4 came first here, so its loss stands)
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)]
    assert [(e.step, e.value) for e in acc.Scalars("train/eval_return")] == [(4, 2.0)]
    assert set(acc.Tags()["scalars"]) == {"train/loss", "train/eval_return", "charts/steps_per_s"}


# the stages: progress.csv holds the rows main() returns, TensorBoard files with --tensorboard -------------------------
@pytest.mark.parametrize("name", ["oril", "bcnd", "lobsdice", "ilid", "iswbc"])
def test_trainers_write_progress_csv_and_tensorboard(name, tiny_dataset, tmp_path):
    import train_bcnd
    import train_ilid
    import train_iswbc
    import train_lobsdice
    import train_oril

    tiny = dict(dataset=tiny_dataset, out_dir=str(tmp_path), hidden=16, eval_episodes=2, tensorboard=True, threads=1)
    res = {"oril": lambda: train_oril.main(train_oril.Args(reward_steps=10, total_steps=20, eval_every=10, **tiny)),
           "bcnd": lambda: train_bcnd.main(train_bcnd.Args(n_policies=2, n_rounds=2, epochs=1, batch_size=64, **tiny)),
           "lobsdice": lambda: train_lobsdice.main(train_lobsdice.Args(total_steps=20, eval_every=10, **tiny)),
           "ilid": lambda: train_ilid.main(train_ilid.Args(d_steps=10, bc_steps=10, total_steps=20, eval_every=10,
                                                           **tiny)),
           "iswbc": lambda: train_iswbc.main(train_iswbc.Args(total_steps=20, eval_every=10, **tiny))}[name]()
    assert len(res["log"]) == 2 and csv_rows(tmp_path / "progress.csv") == as_csv(res["log"])
    assert glob.glob(str(tmp_path / "tb" / "events.out.tfevents.*"))


def test_ivae_writes_a_progress_csv_per_fit(tiny_dataset, tmp_path):
    import train_ivae

    train_ivae.main(train_ivae.Args(dataset=tiny_dataset, out_dir=str(tmp_path), total_steps=20, log_every=10,
                                    restarts=1, hidden=16, tensorboard=True, threads=1))
    for csv_name, prior in (("progress.csv", "conditional"), ("progress_standard.csv", "standard")):
        rows = csv_rows(tmp_path / csv_name)
        assert [r["step"] for r in rows] == ["10", "20"] and set(rows[0]) == {"step", "elbo", "log_lik", "kl"}
        assert glob.glob(str(tmp_path / "tb" / prior / "events.out.tfevents.*"))


@pytest.mark.dmc
def test_sac_progress_csv_survives_a_resume(tmp_path):
    pytest.importorskip("dm_control")
    import train_behavior

    common = dict(env="dmc:cartpole-swingup", out_dir=str(tmp_path), learning_starts=100, snapshot_steps=(100, 200),
                  eval_every=100, eval_episodes=1, checkpoint_every=100, batch_size=32, hidden=32, tensorboard=True,
                  threads=1)
    train_behavior.main(train_behavior.Args(total_steps=100, **common))
    res = train_behavior.main(train_behavior.Args(total_steps=200, resume=True, **common))
    assert [r["step"] for r in res["rows"]] == [100, 200]  # the row before the resume, then this process's
    assert csv_rows(tmp_path / "progress.csv") == as_csv(res["rows"])
    assert len(glob.glob(str(tmp_path / "tb" / "events.out.tfevents.*"))) == 2  # one per process
