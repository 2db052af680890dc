"""Behavior cloning baselines of OILCA §5: BC-exp (D_E only) and BC-all (D_all = D_E ∪ D_U), one flag apart.

Policy: policy.py's tanh-Gaussian actor, as in the official DWBC code (2×256 ReLU, heads μ ∈ [-9, 9] and log σ ∈ [-5, 2],
π = tanh(N(μ, σ))), trained by maximum likelihood, L = -E[Σ_j log π_j(a_j | s)], with Adam (lr 1e-4,
weight decay 5e-3, the DWBC actor's settings) so BC and DWBC differ only in their weights. Observations are
normalised with the mean/std of the training rows (+1e-3), actions are mapped from the dataset's bounds to [-1, 1].

Input:  a dataset `.npz` (docs/contract.md). With `--data expert` the rows with expert=True (the collected D_E; with
        `--include-augmented` also the counterfactual rows of an augmented dataset); with `--data all` every
        collected row.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (step, loss, eval return; a row
        per evaluation, written as the run goes), args.json, and with --tensorboard event files in tb/. The
        deterministic action is the tanh of the mean. policy.pt and args.json are staged beside --out-dir and moved in
        together when the run completes (contract.RunFolder); a run whose loss turns NaN or inf stops and writes nothing.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process, the R actors
stacked into one batched network (policy.stack_replicas). Replica k is initialised as `--seed k` alone is, draws its
minibatches from its own default_rng(k) with the same calls, and has its own slice of the Adam moments, so it
follows the single run up to float rounding; it writes the files of that run to `--out-dir` and `--final-eval`
with `{seed}` replaced by k. One seed (the default) runs the same loop on the plain actor, exactly as before seeds
could share a process.

Budgets and GPUs: `--checkpoints 5000 20000` also saves the policy at those steps (`policy_step<N>.pt`: the N-step
run's policy, bit for bit on a CPU); `--cuda --cuda-graph` replays each step as a CUDA graph (policy.GraphedStep).
"""

import copy
import os
from dataclasses import dataclass
from typing import Literal, Optional, Tuple

import numpy as np
import torch

import checks
import cli
import contract
import envs
from policy import (Actor, GraphedStep, IndexChunks, Normalizer, artifact, bc_loss, check_checkpoints, checkpoint_name,
                    cpu_threads, final_eval, final_eval_paths, in_training_eval, load_replica, log_replicas,
                    minibatch_generator, recorded_args, replica_args, replica_values, stack_replicas)
from progress import Progress


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
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
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
    """episodes per evaluation during training (on the training classes of c; 0: no rollout, eval_return NaN)"""
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
    threads: Optional[int] = None
    """torch CPU threads (default: every core this process may use)"""
    cuda: bool = False
    """use CUDA when available (data and minibatch sampling then stay on the GPU: each replica's device generator
    draws the indices of 1,000 steps at a time)"""
    cuda_graph: bool = False
    """with --cuda on a GPU: replay each training step as a CUDA graph (a step of this small network is otherwise
    bound by kernel launches); the same steps as without it, up to float rounding; ignored on a CPU"""
    checkpoints: Tuple[int, ...] = ()
    """also save the policy at these steps (each below --total-steps) as policy_step<N>.pt in --out-dir: one run
    gives the policies of several budgets"""
    tensorboard: bool = False
    """also write TensorBoard event files to <out_dir>/tb"""
    loss_trace: int = 0
    """return the losses of the first this many steps (tests compare replicas with single runs)"""


def draw(rng: np.random.Generator, gen: Optional[torch.Generator], n: int, batch: int, device) -> torch.Tensor:
    """Minibatch row indices: numpy's rng on the CPU, the replica's device generator on a GPU."""
    if gen is None:
        return torch.as_tensor(rng.integers(0, n, batch), device=device)
    return torch.randint(0, n, (batch,), generator=gen, device=device)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args)
    checkpoints = check_checkpoints(args.checkpoints, args.total_steps)
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    if len({a.dataset for a in runs}) > 1:
        raise ValueError(f"--dataset {args.dataset}: train_bc.py clones one dataset for every seed")
    data = contract.load_dataset(runs[0].dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": runs[0].dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    if args.data == "expert":
        contract.require_expert(data, args.dataset)
        rows = data["expert"] & (~aug | args.include_augmented)
    else:
        rows = ~aug
    obs, act = data["observations"][rows], data["actions"][rows]
    method = args.method or f"bc_{args.data if args.data == 'all' else 'exp'}"
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    graphed = args.cuda_graph and device.type == "cuda"

    norm = Normalizer(obs, meta["action_low"], meta["action_high"])
    obs_t, act_t = torch.as_tensor(norm.obs(obs), device=device), torch.as_tensor(norm.act(act), device=device)
    print(f"{method}: cloning {rows.sum()} rows of {args.dataset} ({contract.describe(data)})"
          + (f", seeds {[a.seed for a in runs]} side by side" if len(runs) > 1 else "")
          + (", each step a CUDA graph" if graphed else ""))

    def new_actor(seed: int) -> Actor:
        torch.manual_seed(seed)
        return Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps)

    def is_eval_step(step: int) -> bool:
        return bool(args.eval_every and step % args.eval_every == 0) or step == args.total_steps

    def save(actor: Actor, a: Args, path: str, **extra) -> None:
        contract.save_policy(path, artifact(
            actor, norm, method=method, seed=a.seed, env=spec, dataset_fingerprint=contract.fingerprint(data),
            dataset=a.dataset, train_args=recorded_args(a), **extra))

    def finish(actor: Actor, a: Args, run: contract.RunFolder) -> None:
        save(actor, a, os.path.join(run.staging, "policy.pt"))
        contract.save_json(os.path.join(run.staging, "args.json"), recorded_args(a))
        run.commit()  # policy.pt and args.json appear in --out-dir together, beside the run's progress.csv
        if a.final_eval:
            final_eval(os.path.join(a.out_dir, "policy.pt"), spec, a.final_eval_episodes, a.final_eval)

    # R replicas (R = 1: the plain actor), each with its own initialisation, minibatches and Adam moments
    R = len(runs)
    actors = [new_actor(a.seed) for a in runs]  # replica k built as `--seed k` builds its actor
    net = actors[0].to(device) if R == 1 else stack_replicas(actors).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                           **({"capturable": True} if graphed else {}))
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    replica = lambda k: net if R == 1 else load_replica(actors[k], net, k)  # noqa: E731
    chunks = IndexChunks(lambda n: torch.stack([torch.randint(0, len(obs_t), (n, args.batch_size), generator=g,
                                                              device=device) for g in gens], 1).squeeze(1)) \
        if device.type == "cuda" else None

    def step_fn(idx, _key=None):
        loss = bc_loss(net, obs_t[idx], act_t[idx])  # a scalar, or [R]
        opt.zero_grad()
        loss.sum().backward()  # replica k's slice of the gradient is ∂loss_k alone
        opt.step()
        return loss

    step_once = GraphedStep(step_fn, graphed)
    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    progs = [Progress(method, args.total_steps, a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", args.total_steps)  # one line: means over replicas
    logs, trace = [[] for _ in runs], []
    for step in range(1, args.total_steps + 1):
        if chunks is not None:
            idx = chunks.next()
        else:
            idx = [draw(r, g, len(obs_t), args.batch_size, device) for r, g in zip(rngs, gens)]
            idx = idx[0] if R == 1 else torch.stack(idx)  # [B] or [R, B]
        loss = step_once(idx)
        if step <= args.loss_trace:
            trace.append(loss.detach().clone())
        if step in checkpoints:  # this budget's policy, beside the final one (the run goes on unchanged)
            for k, a in enumerate(runs):
                save(copy.deepcopy(replica(k)).cpu(), a, os.path.join(folders[k].staging, checkpoint_name(step)),
                     checkpoint_step=step)
        if is_eval_step(step):
            rets = [in_training_eval(replica(k), norm, spec, args.eval_episodes, args.eval_seed) for k in range(R)]
            log_replicas(logs, progs, runs, step, {"loss": replica_values(loss), "eval_return": rets}, method)
            line.update(step, {"loss": float(np.mean([log[-1]["loss"] for log in logs])), "eval_return": float(np.mean(rets))},
                        force=True)
        else:
            line.update(step, lambda: {"loss": loss.mean().item()})
    trace = torch.stack(trace).reshape(len(trace), -1).T.tolist() if trace else [[] for _ in runs]
    for k, a in enumerate(runs):
        progs[k].close()
        finish(net.cpu() if R == 1 else load_replica(actors[k], net, k), a, folders[k])
    if R == 1:
        return {"method": method, "log": logs[0], "loss_trace": trace[0]}
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k], "loss_trace": trace[k]} for k, a in enumerate(runs)]}


if __name__ == "__main__":
    cli.run(main, Args)
