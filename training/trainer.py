"""What every trainer shares, in one module: the common flags, the dataset, the policy and its artifact, evaluation
during and after training, progress, and finishing a run folder.

A reference trainer (train_<method>.py) imports this module and the data contract (oilca/contract.py), nothing else
of the project, so a copy of it is a new method that runs in the pipeline as it is.

    @dataclass
    class Args(TrainerArgs):          # --dataset, --out-dir, --seed, --eval-*, --final-eval*, --threads, --cuda, ...
        out_dir: str = "runs/mymethod"
        alpha: float = 1.0

    data, meta, spec = load(args.dataset)
    device = setup(args)              # torch threads and device
    ...
    run = start(args, spec, name)     # a fresh run folder and its progress.csv
    ...                               # the training loop; run.log(step, {...}, policy) at evaluation steps
    finish(run, args, spec, artifact(actor, norm, **run_facts(...)))   # policy.pt + args.json, then --final-eval
"""

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import envs
from oilca import checks, cli, contract
from training.policy import (EVAL_SEED, LOG_STD_MAX, LOG_STD_MIN, MU_MAX, Actor, Normalizer, artifact, bc_loss,  # noqa: F401
                          check_checkpoints, checkpoint_name, cpu_threads, final_eval, final_eval_paths,
                          in_training_eval, nll, recorded_args)
from oilca.progress import Progress

run_cli = cli.run  # a trainer's __main__: parse its Args, run main, refusals as one `error: …` line


@dataclass
class TrainerArgs:
    """The flags every trainer shares. A trainer's Args inherits them and adds its method's own."""
    dataset: str = "data/toy.npz"
    """input dataset (.npz of the data contract): raw, or augmented by augment.py"""
    out_dir: str = "runs/trainer"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy and its results (default: the trainer's own name)"""
    seed: int = 0
    """seed of the initialisation and minibatches"""
    eval_every: int = 1_000
    """evaluate the policy every this many steps (0: only at the end), for learning curves"""
    eval_episodes: int = 20
    """episodes per evaluation during training (training classes of c; 0: no rollout, eval_return NaN)"""
    eval_seed: int = 50_000
    """seed of the evaluations during training (apart from the final evaluation seed 10000 of evaluate.py)"""
    final_eval: Optional[str] = None
    """after training, evaluate the saved policy (as evaluate.py does) and write its JSON here; `{split}` becomes
    each split (train/heldout, CausalWorld's A/B)"""
    final_eval_episodes: int = 100
    """episodes per split of that final evaluation"""
    threads: Optional[int] = None
    """torch CPU threads (default: every core this process may use)"""
    cuda: bool = False
    """train on a GPU when one is available"""
    tensorboard: bool = False
    """also write TensorBoard event files to <out_dir>/tb"""
    loss_trace: int = 0
    """return the losses of the first this many steps (the fast path's equivalence tests compare them)"""


def check_args(args, **rules) -> None:
    """The value rules every trainer shares (seeds, counts, learning rates, decays), then the trainer's `rules`
    (checks.Real(…), checks.COUNT, …): a bad value is a one-line ValueError naming the flag."""
    checks.trainer(args, **rules)


def load(path: str):
    """(dataset, its metadata, its env description) of a dataset file, validated by the data contract."""
    data = envs.load_dataset(path)
    return data, data["metadata"], envs.env_spec(data["metadata"])


def training_rows(data: dict):
    """Boolean masks (collected expert rows D_E, augmented rows, unlabelled rows D_U) of a dataset, raw or augmented."""
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    return data["expert"] & ~aug, aug, ~data["expert"] & ~aug


def check_outputs(args, spec: dict, inputs: Optional[dict] = None) -> None:
    """Refuse, before training, outputs that would overwrite an input or cannot be written (one line)."""
    contract.check_paths(inputs or {"--dataset": args.dataset}, folders={"--out-dir": args.out_dir},
                         files={"--final-eval": final_eval_paths(args.final_eval, spec)})


def setup(args) -> torch.device:
    """Torch's CPU threads (--threads) and the device (--cuda where a GPU is available)."""
    torch.set_num_threads(cpu_threads(args.threads))
    return torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")


def is_eval_step(args, step: int, total: int) -> bool:
    """An evaluation step: every --eval-every steps, and the last one."""
    return bool(args.eval_every and step % args.eval_every == 0) or step == total


class Run:
    """A run in progress: its fresh run folder (contract.RunFolder: results staged beside --out-dir and moved in
    together when the run completes), its progress line and progress.csv, and its log of evaluation rows."""

    def __init__(self, args, name: str, total: int, unit: str = "steps"):
        self.args, self.name, self.log_rows = args, name, []
        self.folder = contract.RunFolder(args.out_dir)
        self.progress = Progress(name, total, args.out_dir, tensorboard=args.tensorboard, unit=unit)

    def tick(self, step: int, scalars) -> None:
        """The progress line (at most every ~10 s); `scalars` a dict or a function giving one, read only then."""
        self.progress.update(step, scalars)

    def log(self, step: int, row: dict, key: str = "step") -> dict:
        """One evaluation row: progress.csv and the line; stops the run (nothing saved) at a NaN or inf loss."""
        row = {key: step, **row}
        checks.finite_losses(row, step, self.name)
        self.log_rows.append(row)
        self.progress.log(row)
        self.progress.update(step, {k: v for k, v in row.items() if k != key}, force=True)
        return row

    def staged(self, name: str) -> str:
        """Where a file of this run is written before the run completes (e.g. a --checkpoints policy)."""
        return os.path.join(self.folder.staging, name)


def start(args, name: str, total: int, unit: str = "steps") -> Run:
    return Run(args, name, total, unit)


def run_facts(args, data: dict, method: str, **extra) -> dict:
    """What a policy artifact records about its run, and every result JSON of it repeats: method, seed, env, the
    dataset and its fingerprint, the trainer's arguments, the policy's step count (`policy_step`: --total-steps, or
    the step of a --checkpoints policy) and, on an augmented dataset, its augmentation facts (ratio, mode, labels, and
    the sampler's kind and training steps) from the dataset's metadata."""
    meta = data["metadata"]
    facts = {"method": method, "seed": args.seed, "env": envs.env_spec(meta),
             "dataset_fingerprint": contract.fingerprint(data), "dataset": args.dataset,
             "train_args": recorded_args(args), "augmentation": augmentation_facts(meta)}
    if getattr(args, "total_steps", None) is not None:
        facts["policy_step"] = int(args.total_steps)
    if extra.get("checkpoint_step") is not None:
        facts["policy_step"] = int(extra["checkpoint_step"])
    return {**facts, **extra}


def augmentation_facts(meta: dict) -> Optional[dict]:
    """The run facts of an augmented dataset (augment.py's metadata): ratio, mode, labels, sampler {kind, steps,
    seed}; None for a raw dataset."""
    aug = meta.get("augmentation")
    if not isinstance(aug, dict):
        return None
    return {"ratio": aug.get("ratio"), "mode": aug.get("mode"), "labels": aug.get("labels"),
            "sampler": aug.get("sampler_facts")}


def finish(run: Run, args, spec: dict, policy_artifact: dict) -> None:
    """Write policy.pt and args.json, move them into --out-dir together (beside progress.csv), then --final-eval."""
    run.progress.close()
    contract.save_policy(run.staged("policy.pt"), policy_artifact)
    contract.save_json(run.staged("args.json"), recorded_args(args))
    run.folder.commit()
    if args.final_eval:
        final_eval(os.path.join(args.out_dir, "policy.pt"), spec, args.final_eval_episodes, args.final_eval)
