"""Behavior cloning baselines of OILCA §5: BC-exp (D_E only) and BC-all (D_all = D_E ∪ D_U), one flag apart.

Policy: the tanh-Gaussian actor of the official DWBC code (training/policy.py: 2×256 ReLU, heads μ ∈ [-9, 9] and
log σ ∈ [-5, 2], π = tanh(N(μ, σ))), trained by maximum likelihood, L = -E[Σ_j log π_j(a_j | s)], with Adam (lr 1e-4,
weight decay 5e-3, the DWBC actor's settings) so BC and DWBC differ only in their weights. Observations are
normalised with the mean/std of the training rows (+1e-3), actions are mapped from the dataset's bounds to [-1, 1].

Input:  a dataset `.npz` (docs/contract.md). With `--data expert` the rows with expert=True (the collected D_E; with
        `--include-augmented` also the counterfactual rows of an augmented dataset); with `--data all` every
        collected row.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (step, loss, eval return; a row
        per evaluation, written as the run goes), args.json, and with --tensorboard event files in tb/. The
        deterministic action is the tanh of the mean. policy.pt and args.json are moved into --out-dir together
        when the run completes; a run whose loss turns NaN or inf stops and writes nothing.
Budgets: `--checkpoints 5000 20000` also saves the policy at those steps (`policy_step<N>.pt`: the N-step run's
        policy, bit for bit on a CPU).

Several seeds at once, sampling on the GPU and CUDA graphs: fast/train_bc.py (same networks and loss, imported).
"""

import copy
import dataclasses
from dataclasses import dataclass
from typing import Literal, Tuple

import numpy as np
import torch

from oilca import contract
from training.trainer import (Actor, Normalizer, TrainerArgs, artifact, bc_loss, check_args, check_checkpoints,
                           check_outputs, checkpoint_name, finish, in_training_eval, is_eval_step, load, run_cli,
                           run_facts, setup, start, rows_tensor, training_rows)


@dataclass
class Args(TrainerArgs):
    out_dir: str = ""
    """folder for policy.pt, progress.csv and args.json (not given: runs/bc_exp, with --data all runs/bc_all)"""
    data: Literal["expert", "all"] = "expert"
    """BC-exp clones D_E only; BC-all clones D_all"""
    include_augmented: bool = False
    """with --data expert: also clone the counterfactual (augmented) rows of an augmented dataset"""
    total_steps: int = 5_000
    """gradient steps"""
    batch_size: int = 256
    """minibatch size"""
    lr: float = 1e-4
    """Adam learning rate"""
    weight_decay: float = 5e-3
    """Adam weight decay of the actor"""
    hidden: int = 256
    """hidden width of the actor"""
    n_hidden: int = 2
    """hidden layers of the actor"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the tanh-Gaussian likelihood (CausalWorld: its experts'
    actions sit at exactly ±1, where 1e-6 makes the targets ±7.25; use 1e-2)"""
    checkpoints: Tuple[int, ...] = ()
    """also save the policy at these steps (each below --total-steps) as policy_step<N>.pt in --out-dir: one run
    gives the policies of several budgets"""


def cloned_rows(data: dict, args: Args) -> np.ndarray:
    """The rows BC clones: D_E (with --include-augmented also the counterfactual rows), or every collected row."""
    _, augmented, _ = training_rows(data)
    if args.data == "expert":
        contract.require_expert(data, args.dataset)
        return data["expert"] & (~augmented | args.include_augmented)
    return ~augmented


def with_out_dir(args):
    """args with --out-dir filled when not given: runs/bc_exp, or runs/bc_all with --data all (BC-all's run does not
    land in BC-exp's folder)."""
    return args if args.out_dir else dataclasses.replace(args, out_dir=f"runs/bc_{'all' if args.data == 'all' else 'exp'}")


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    args = with_out_dir(args)
    check_args(args)
    checkpoints = check_checkpoints(args.checkpoints, args.total_steps)
    data, meta, spec = load(args.dataset)
    check_outputs(args, spec)
    rows = cloned_rows(data, args)
    method = args.method or f"bc_{args.data if args.data == 'all' else 'exp'}"
    device = setup(args)
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"], rows)
    obs = rows_tensor(data["observations"], norm.obs, device, rows)
    act = rows_tensor(data["actions"], norm.act, device, rows)
    print(f"{method}: cloning {rows.sum()} rows of {args.dataset} ({contract.describe(data)})")

    torch.manual_seed(args.seed)
    actor = Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps).to(device)
    opt = torch.optim.Adam(actor.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    rng = np.random.default_rng(args.seed)

    def policy_artifact(**extra) -> dict:
        return artifact(copy.deepcopy(actor).cpu(), norm, **run_facts(args, data, method, **extra))

    run = start(args, method, args.total_steps)
    trace = []
    for step in range(1, args.total_steps + 1):
        idx = torch.as_tensor(rng.integers(0, len(obs), args.batch_size), device=device)
        loss = bc_loss(actor, obs[idx], act[idx])  # -E[Σ_j log π_j(a_j | s)]
        opt.zero_grad()
        loss.backward()
        opt.step()

        if step <= args.loss_trace:
            trace.append(loss.item())
        if step in checkpoints:  # this budget's policy, beside the final one (the run goes on unchanged)
            contract.save_policy(run.staged(checkpoint_name(step)), policy_artifact(checkpoint_step=step))
        if is_eval_step(args, step, args.total_steps):
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            run.log(step, {"loss": loss.item(), "eval_return": ret})
        else:
            run.tick(step, lambda: {"loss": loss.item()})
    finish(run, args, spec, policy_artifact())
    return {"method": method, "log": run.log_rows, "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
