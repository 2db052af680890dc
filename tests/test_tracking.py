"""Tracking as the field does it: TensorBoard with one tag per scalar, the hyper-parameters and the final evaluation,
and `--track` (Weights & Biases, offline here, as CleanRL's tests run it), from a trainer and through the runner."""
import glob
import json
import os

import pytest

import runner
from conftest import one_line_error, run

TINY = ["--total-steps", "40", "--hidden", "16", "--eval-every", "20", "--eval-episodes", "2",
        "--final-eval-episodes", "2"]


def wandb_records(path: str) -> list:
    """The protobuf records of an offline W&B run file (`run-<id>.wandb`): a 7-byte header (":W&B", magic, version),
    then LevelDB-log blocks of 32 KiB, each record as crc32 (4), length (2, little-endian), type (1: full, 2: first,
    3: middle, 4: last) and its bytes."""
    from wandb.proto import wandb_internal_pb2 as pb

    raw = open(path, "rb").read()
    assert raw[:4] == b":W&B"
    pos, out, buf = 7, [], b""
    while pos + 7 <= len(raw):
        left = 32768 - pos % 32768
        if left < 7:  # a block's tail too short for a header: zero padding
            pos += left
            continue
        length, kind = int.from_bytes(raw[pos + 4:pos + 6], "little"), raw[pos + 6]
        if length == 0 and kind == 0:
            pos += left
            continue
        buf += raw[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            out.append(rec)
            buf = b""
    return out


def scalars_and_text(folder: str):
    """{tag: [(step, value)]} of the scalars and {tag: text} of the text summaries in a TensorBoard folder, and
    whether the HPARAMS plugin's data is there, read back with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(folder, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    texts = {t: acc.Tensors(t)[0].tensor_proto.string_val[0].decode() for t in acc.Tags()["tensors"]
             if t.startswith("hyperparameters")}
    return scalars, texts, "hparams" in acc.PluginTagToContent("hparams") or bool(acc.PluginTagToContent("hparams"))


def test_tensorboard_has_one_tag_per_scalar_the_hyperparameters_and_the_final_evaluation(tiny_dataset, tmp_path):
    out = tmp_path / "bc"
    run("train_bc.py", "--dataset", tiny_dataset, "--out-dir", str(out), "--tensorboard", "--final-eval",
        str(tmp_path / "final_{split}.json"), *TINY)
    scalars, texts, hparams = scalars_and_text(str(out / "tb"))
    assert {"train/loss", "train/eval_return", "charts/steps_per_s", "eval/train_mean_return",
            "eval/heldout_mean_return"} <= set(scalars)
    assert not [t for t in scalars if t.startswith("progress/")]  # no second tag for the same numbers
    evals = [s for s, _ in scalars["train/eval_return"]]
    assert evals == sorted(set(evals)) == [20, 40]  # each evaluation once
    final = json.load(open(tmp_path / "final_train.json"))
    assert scalars["eval/train_mean_return"] == [(40, pytest.approx(final["mean_return"]))]
    table = texts["hyperparameters/text_summary"]
    assert "|seed|0|" in table and "|total_steps|40|" in table and "|hidden|16|" in table
    assert hparams  # the HPARAMS tab: the arguments beside the final metrics


def test_track_offline_logs_config_scalars_and_summary(tiny_dataset, tmp_path):
    pytest.importorskip("wandb")
    out = tmp_path / "dwbc"
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}
    run("train_dwbc.py", "--dataset", tiny_dataset, "--out-dir", str(out), "--track", "--wandb-project-name", "t",
        "--final-eval", str(tmp_path / "final_{split}.json"), *TINY, env=env)
    runs = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(runs) == 1, os.listdir(tmp_path)
    records = wandb_records(runs[0])
    config = {i.key: json.loads(i.value_json) for r in records if r.WhichOneof("record_type") == "run"
              for i in r.run.config.update}
    assert config["total_steps"] == 40 and config["seed"] == 0 and config["track"] is True
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
               for r in records if r.WhichOneof("record_type") == "history"]
    steps = [h["_step"] for h in history]  # a progress line printed on a slow machine (every ~10 s) adds a row
    assert steps == sorted(set(steps)) and {20, 40} <= set(steps)
    assert all("train/policy_loss" in h for h in history if h["_step"] in (20, 40))
    summary = {}
    for r in records:
        if r.WhichOneof("record_type") == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update})
    final = json.load(open(tmp_path / "final_train.json"))
    assert summary["eval/train_mean_return"] == pytest.approx(final["mean_return"])
    assert "charts/steps_per_s" in summary
    args = json.load(open(out / "args.json"))
    assert args["track"] is True  # recorded when used (left out of the record when not)
    plain = tmp_path / "plain"
    run("train_dwbc.py", "--dataset", tiny_dataset, "--out-dir", str(plain), *TINY)
    assert "track" not in json.load(open(plain / "args.json"))


def test_track_without_wandb_is_one_line_and_writes_nothing(tiny_dataset, tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(  # a Python where wandb is not installed
        "import importlib.util, sys\n_real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'wandb' else _real(name, *a)\n")
    proc = run("train_bc.py", "--dataset", tiny_dataset, "--out-dir", str(tmp_path / "bc"), "--track", *TINY,
               ok=False, env={"PYTHONPATH": str(blocker)})
    assert one_line_error(proc, "--track: Weights & Biases is not installed"), proc.stderr
    assert not (tmp_path / "bc").exists()


def test_the_runner_passes_tensorboard_and_track(tmp_path, monkeypatch):
    kw = dict(root=str(tmp_path), seeds=(0,), dry_run=True, fig5_ratios=())
    plain = {j["name"]: j["command"] for j in runner.main(runner.Args(**kw))["jobs"]}
    assert not [c for c in plain.values() if "--tensorboard" in c or "--track" in c]
    if runner.importlib.util.find_spec("wandb") is None:
        pytest.skip("wandb is not installed")
    logged = {j["name"]: j["command"] for j in runner.main(runner.Args(**kw, tensorboard=True, track=True))["jobs"]}
    for name, command in logged.items():
        if name.startswith(("bc_", "dwbc", "oilca")):
            assert "--tensorboard" in command and "--track" in command, name
        if name == "ivae":
            assert "--tensorboard" in command and "--track" not in command
    real = runner.importlib.util.find_spec
    monkeypatch.setattr(runner.importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real(n, *a))
    with pytest.raises(SystemExit, match="--track: Weights & Biases is not installed"):
        runner.main(runner.Args(**kw, track=True))
