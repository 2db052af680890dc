"""Behavior cloning baselines of OILCA §5: BC-exp (D_E only) and BC-all (D_all = D_E ∪ D_U), one flag apart.

Policy: policy.py's tanh-Gaussian actor, as in the official DWBC code (2×256 ReLU, heads μ ∈ [-9, 9] and log σ ∈ [-5, 2],
π = tanh(N(μ, σ))), trained by maximum likelihood, L = -E[Σ_j log π_j(a_j | s)], with Adam (lr 1e-4,
weight decay 5e-3, the DWBC actor's settings) so BC and DWBC differ only in their weights. Observations are
normalised with the mean/std of the training rows (+1e-3), actions are mapped from the dataset's bounds to [-1, 1].

Input:  a dataset `.npz` (docs/contract.md). With `--data expert` the rows with expert=True (the collected D_E; with
        `--include-augmented` also the counterfactual rows of an augmented dataset); with `--data all` every
        collected row.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (step, loss, eval return),
        args.json. The deterministic action is the tanh of the mean.
"""

import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Literal, Optional

import numpy as np
import torch
import tyro

import contract
import envs
from policy import Actor, Normalizer, artifact, bc_loss, final_eval, in_training_eval


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset"""
    out_dir: str = "runs/bc_exp"
    """folder for policy.pt, progress.csv and args.json"""
    data: Literal["expert", "all"] = "expert"
    """BC-exp clones D_E only; BC-all clones D_all"""
    include_augmented: bool = False
    """with --data expert: also clone the counterfactual (augmented) rows of an augmented dataset"""
    seed: int = 0
    """seed of the initialisation and minibatches"""
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
    eval_every: int = 1_000
    """evaluate the policy every this many steps (0: only at the end), for learning curves"""
    eval_episodes: int = 20
    """episodes per evaluation during training (on the training classes of c)"""
    eval_seed: int = 50_000
    """seed of the evaluations during training (apart from the final evaluation seeds of evaluate.py)"""
    method: Optional[str] = None
    """label stored in the policy (default: bc_exp or bc_all)"""
    final_eval: Optional[str] = None
    """after training, evaluate the saved policy (as evaluate.py does) and write its JSON here; `{split}` becomes train/heldout"""
    final_eval_episodes: int = 100
    """episodes per split of that final evaluation"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the tanh-Gaussian likelihood (CausalWorld: its experts'
    actions sit at exactly ±1, where 1e-6 makes the targets ±7.25; use 1e-2)"""
    threads: int = 1
    """torch CPU threads"""
    cuda: bool = False
    """use CUDA when available"""


def main(args: Args) -> dict:
    data = contract.load_dataset(args.dataset)
    meta = data["metadata"]
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    if args.data == "expert":
        contract.require_expert(data, args.dataset)
        rows = data["expert"] & (~aug | args.include_augmented)
    else:
        rows = ~aug
    obs, act = data["observations"][rows], data["actions"][rows]
    method = args.method or f"bc_{args.data if args.data == 'all' else 'exp'}"
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    norm = Normalizer(obs, meta["action_low"], meta["action_high"])
    obs_t, act_t = torch.as_tensor(norm.obs(obs), device=device), torch.as_tensor(norm.act(act), device=device)
    actor = Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps).to(device)
    opt = torch.optim.Adam(actor.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    spec = envs.env_spec(meta)
    print(f"{method}: cloning {rows.sum()} rows of {args.dataset} ({contract.describe(data)})")

    os.makedirs(args.out_dir, exist_ok=True)
    log, t0 = [], time.time()
    for step in range(1, args.total_steps + 1):
        idx = torch.as_tensor(rng.integers(0, len(obs_t), args.batch_size), device=device)
        loss = bc_loss(actor, obs_t[idx], act_t[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (args.eval_every and step % args.eval_every == 0) or step == args.total_steps:
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            log.append({"step": step, "loss": loss.item(), "eval_return": ret})
            print(f"[{method}] step {step}/{args.total_steps}  loss {loss.item():.3f}  eval return {ret:.2f}  "
                  f"{step / (time.time() - t0):.0f} steps/s", flush=True)

    contract.save_policy(os.path.join(args.out_dir, "policy.pt"), artifact(
        actor, norm, method=method, seed=args.seed, env=spec, dataset_fingerprint=contract.fingerprint(data),
        dataset=args.dataset, train_args=asdict(args)))
    contract.save_json(os.path.join(args.out_dir, "args.json"), asdict(args))
    contract.save_csv(os.path.join(args.out_dir, "progress.csv"), log)
    if args.final_eval:
        final_eval(os.path.join(args.out_dir, "policy.pt"), spec, args.final_eval_episodes, args.final_eval)
    return {"method": method, "log": log}


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (contract.ContractError, ValueError) as e:
        sys.exit(f"error: {e}")
