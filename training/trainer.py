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

Also here: `--checkpoints` (check_checkpoints, checkpoint_name: policies saved at earlier steps as policy_step<N>.pt,
so one run to the largest budget gives every smaller budget's policy: with a constant learning rate and the same
minibatch stream, the policy at step N of a long run is the policy of an N-step run), the recorded arguments, the
default thread count and the final evaluation of a trainer's `--final-eval`.
"""

import dataclasses
import importlib.util
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import torch

import envs
from oilca import checks, cli, contract
from training.policy import (EVAL_SEED, LOG_STD_MAX, LOG_STD_MIN, MU_MAX, Actor, Normalizer, artifact, mean_std, row_index,  # noqa: F401
                             artifact_info, bc_loss, check_dims, evaluate_and_save, in_training_eval, nll)
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
    """label stored in the policy and its results (not given: the trainer's own name)"""
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
    """torch CPU threads (not given: every core this process may use)"""
    cuda: bool = False
    """train on a GPU when one is available"""
    tensorboard: bool = False
    """also write TensorBoard event files to <out_dir>/tb: train/ and charts/ scalars, the hyper-parameters, and the
    final evaluation's mean return per split (eval/)"""
    track: bool = False
    """log the run to Weights & Biases (pip install wandb; WANDB_MODE=offline keeps it on this machine), as CleanRL's
    --track: the arguments as its config, the same scalars as TensorBoard, the final evaluation in its summary"""
    wandb_project_name: str = "oilca"
    """the Weights & Biases project of --track"""
    wandb_entity: Optional[str] = None
    """the Weights & Biases team or user of --track (not given: the account's default)"""
    loss_trace: int = 0
    """return the losses of the first this many steps (the fast path's equivalence tests compare them)"""
    flush_denormal: bool = False
    """flush denormal floats to zero on the CPU (torch.set_flush_denormal): long CPU runs slow down several-fold as
    denormals build up in the weights and Adam's moments; results change in the last digits, so it is off by default
    (the budget study turns it on)"""


def check_args(args, **rules) -> None:
    """The value rules every trainer shares (seeds, counts, learning rates, decays), then the trainer's `rules`
    (checks.Real(…), checks.COUNT, …): a bad value is a one-line ValueError naming the flag. --track without wandb
    is refused here too."""
    checks.trainer(args, **rules)
    check_tracking(args)


def load(path: str):
    """(dataset, its metadata, its env description) of a dataset file, validated by the data contract."""
    data = envs.load_dataset(path)
    return data, data["metadata"], envs.env_spec(data["metadata"])


def training_rows(data: dict):
    """Boolean masks (collected expert rows D_E, augmented rows, unlabelled rows D_U) of a dataset, raw or augmented."""
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    return data["expert"] & ~aug, aug, ~data["expert"] & ~aug


class MappedRows:
    """The rows of a memory-mapped dataset array (a dataset larger than memory), read and transformed (`fn`, e.g.
    Normalizer.obs) only when indexed: `rows_t[idx]` for an index tensor, array or slice gives the tensor on
    `device` that torch.as_tensor(fn(arr))[idx] would give, bit for bit (fn acts row by row)."""

    def __init__(self, arr: np.ndarray, fn, device: torch.device, rows: Optional[np.ndarray] = None):
        self.arr, self.fn, self.device, self.rows = arr, fn, device, rows
        self.shape = (len(arr) if rows is None else len(rows),) + tuple(arr.shape[1:])

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, idx):
        if torch.is_tensor(idx):
            idx = idx.cpu().numpy()
        if self.rows is not None:
            idx = self.rows[idx]
        return torch.as_tensor(self.fn(self.arr[idx]), device=self.device)


def rows_tensor(arr: np.ndarray, fn, device: torch.device, rows: Optional[np.ndarray] = None):
    """fn(arr[rows]) as a tensor on `device`; for a memory-mapped array, MappedRows, which reads rows when indexed."""
    if contract.is_mapped(arr):
        return MappedRows(arr, fn, device, row_index(rows, len(arr)))
    return torch.as_tensor(fn(arr if rows is None else arr[rows]), device=device)


def transition_tensors(data: dict, norm: Normalizer, device: torch.device):
    """(observations, next observations, actions) of every row, normalised by `norm` (whose statistics each method
    chooses), as tensors on `device` (rows_tensor: read when indexed if the dataset is memory-mapped)."""
    return (rows_tensor(data["observations"], norm.obs, device),
            rows_tensor(data["next_observations"], norm.obs, device),
            rows_tensor(data["actions"], norm.act, device))


def check_outputs(args, spec: dict, inputs: Optional[dict] = None) -> None:
    """Refuse, before training, outputs that would overwrite an input or cannot be written (one line)."""
    contract.check_paths(inputs or {"--dataset": args.dataset}, folders={"--out-dir": args.out_dir},
                         files={"--final-eval": final_eval_paths(args.final_eval, spec)})


def setup(args) -> torch.device:
    """Torch's CPU threads (--threads) and the device (--cuda where a GPU is available)."""
    torch.set_num_threads(cpu_threads(args.threads))
    if getattr(args, "flush_denormal", False):
        torch.set_flush_denormal(True)  # for the rest of this process
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
        self.tracker = start_tracking(args, name) if getattr(args, "track", False) else None
        self.progress = Progress(name, total, args.out_dir, tensorboard=args.tensorboard, unit=unit, track=self.tracker)
        self.progress.hparams(recorded_args(args))

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


def check_tracking(args) -> None:
    """--track needs the wandb package: a one-line ValueError before anything is written."""
    if getattr(args, "track", False) and importlib.util.find_spec("wandb") is None:
        raise ValueError("--track: Weights & Biases is not installed (pip install wandb; WANDB_MODE=offline needs no "
                         "account)")


def start_tracking(args, name: str):
    """A Weights & Biases run for --track (its own run, so several seeds in one process each get one): named
    <method>_s<seed>, grouped by method, the recorded arguments as its config."""
    import wandb

    return wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=f"{name}_s{args.seed}",
                      group=name, config=recorded_args(args), reinit="create_new")


def log_final(run: Run, args, results: list) -> None:
    """The final evaluation's mean return (and CausalWorld's success) per split: TensorBoard scalars eval/<split>_…
    at the last step and the hyper-parameters with them (TensorBoard's HPARAMS tab); the W&B run's summary; then the
    W&B run ends."""
    metrics = {}
    for r in results:
        metrics[f"eval/{r['split']}_mean_return"] = r["mean_return"]
        if r.get("mean_success") is not None:
            metrics[f"eval/{r['split']}_mean_success"] = r["mean_success"]
    step = int(getattr(args, "total_steps", 0) or 0)
    if args.tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(os.path.join(args.out_dir, "tb")) as w:  # add_hparams writes the metrics as scalars too
            hp = {k: v if isinstance(v, (int, float, str, bool)) else str(v) for k, v in recorded_args(args).items()}
            w.add_hparams(hp, metrics, run_name=".", global_step=step)
    if run.tracker is not None:
        if metrics:
            run.tracker.log(metrics, step=step)
        run.tracker.summary.update(metrics)
        run.tracker.finish()


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
    results = []
    if args.final_eval:
        results = final_eval(os.path.join(args.out_dir, "policy.pt"), spec, args.final_eval_episodes, args.final_eval)
    log_final(run, args, results)


def check_checkpoints(checkpoints: Sequence[int], total_steps: int) -> List[int]:
    """`--checkpoints`: distinct steps in [1, --total-steps); a one-line ValueError otherwise. Returns them sorted."""
    steps = sorted(set(int(c) for c in checkpoints))
    if len(steps) != len(checkpoints) or any(not 1 <= c < total_steps for c in steps):
        raise ValueError(f"--checkpoints {' '.join(map(str, checkpoints))}: need distinct steps between 1 and "
                         f"--total-steps - 1 ({total_steps - 1})")
    return steps


def recorded_args(args) -> dict:
    """A trainer's Args as its args.json and artifact record them: `--checkpoints` as a list, and the options added
    after the first results (`--checkpoints`, `--cuda-graph`, `--flush-denormal`, `--track` and its project and
    entity) left out when unused, so runs made before these options existed keep identical records."""
    out = dataclasses.asdict(args)
    for name, unused in (("checkpoints", ()), ("cuda_graph", False), ("flush_denormal", False), ("track", False),
                         ("wandb_project_name", "oilca"), ("wandb_entity", None)):
        if name in out:
            if tuple(out[name]) == unused if name == "checkpoints" else out[name] == unused:
                del out[name]
            elif name == "checkpoints":
                out[name] = list(out[name])
    return out


def checkpoint_name(step: int) -> str:
    """The file of the policy saved at `step` by `--checkpoints` (beside policy.pt in the run folder)."""
    return f"policy_step{step}.pt"


def cpu_threads(threads: Optional[int]) -> int:
    """`--threads`, or by default every core this process may run on."""
    if threads:
        return threads
    return cli.cpu_cores()


def final_eval_paths(out: Optional[str], spec: dict) -> list:
    """The result files a trainer's `--final-eval OUT` will write on this env's splits (none without it); a
    ValueError, before any training, when the env has several splits and OUT lacks `{split}`."""
    if out is None:
        return []
    splits = envs.default_splits(spec)
    if len(splits) > 1 and "{split}" not in out:
        raise ValueError(f"--final-eval {out}: with several splits ({', '.join(splits)}) it must contain {{split}}")
    return [out.replace("{split}", split) for split in splits]


def final_eval(path: str, spec: dict, episodes: int, out: str, seed: int = EVAL_SEED) -> list:
    """A trainer's `--final-eval`: evaluate the policy it just saved on every split its env has (train/heldout, or
    CausalWorld's spaces A and B), with the evaluation seed of evaluate.py."""
    art = contract.load_policy(path)
    check_dims(path, art, spec)
    splits = envs.default_splits(spec)
    if len(splits) > 1 and "{split}" not in out:
        raise ValueError("with several splits, --final-eval must contain {split}")
    args = {"policy": path, "split": list(splits), "episodes": episodes, "seed": seed, "out": out}
    return [evaluate_and_save(contract.build_policy(art), artifact_info(art, path), spec, split, None, episodes, seed,
                              out, args) for split in splits]
