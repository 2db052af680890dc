"""The fast path of train_bcnd.py: several seeds side by side in one process, each epoch's minibatches drawn on the
GPU, each training step replayed as a CUDA graph. The method is train_bcnd.py's (its Args, Gaussian ensemble,
losses and data helpers are imported from it); this file only runs R replicas of it at once.

    python fast/train_bcnd.py --seeds 0 1 2 3 4 --out-dir "runs/bcnd_s{seed}" --cuda --cuda-graph

train_bcnd.GaussianEnsemble already computes its K members side by side, so R replicas are one ensemble of R·K
members, replica k's members k·K … k·K + K - 1 (`stack_members`; `replica_members` copies replica k's K back out, for
its evaluations and its artifact). Replica k draws its split and its minibatches from its own default_rng(k) with
the reference's calls (ref.split_rows, ref.epoch_rows), its initialisations and its evaluations' layers from torch's
generator as `--seed k` alone seeds it (TorchStreams), and keeps its own log R; its loss is the reference's
ensemble_loss applied to its members (per_replica), and its slice of the AdamW moments is its own. So on a CPU
replica k follows `train_bcnd.py --seed k` up to float rounding (tests/test_fast_bcnd.py) and writes that run's
files to `--out-dir` and `--final-eval` with `{seed}` replaced by k.

On a GPU (--cuda) the split is still drawn by numpy (once), but each epoch's order of every member's split is drawn
on the device from the replica's own generator (`device_epoch_rows`, an epoch at a time through IndexChunks), so
these runs take other minibatches than the CPU ones. With --cuda-graph every training step is replayed as a CUDA
graph (GraphedStep, AdamW with capturable=True). Each round starts a fresh ensemble and optimiser, so the graphs
are captured anew every round; the epoch's last minibatch, shorter when |D_k| is not a multiple of the batch size,
is a graph of its own (the same index buffer, cut to its length). Eager, as host-side work once per round: the
fresh initialisations (on the CPU streams), the log R pass over every row after each round, the evaluations, the
logging and the artifacts.
"""

import copy
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_bcnd as ref  # noqa: E402
from fast.replicas import (FastArgs, GraphedStep, IndexChunks, log_replicas, minibatch_generator,  # noqa: E402
                           per_replica, samples_on_device, seed_runs, TorchStreams)
from oilca import checks, contract  # noqa: E402
from training.trainer import (artifact, check_args, finish, in_training_eval, is_eval_step, Normalizer,  # noqa: E402
                              run_cli, run_facts, setup, start, training_rows)


@dataclass
class Args(ref.Args, FastArgs):
    pass


@torch.no_grad()
def stack_members(ensembles: Sequence[ref.GaussianEnsemble]) -> ref.GaussianEnsemble:
    """One ensemble of all the members of several (their parameters concatenated along the member dim, in order)."""
    out = copy.deepcopy(ensembles[0])
    for name, p in out.named_parameters():
        p.set_(torch.cat([e.get_parameter(name) for e in ensembles]).detach().clone())
    return out


@torch.no_grad()
def replica_members(ens: ref.GaussianEnsemble, k: int, n: int) -> ref.GaussianEnsemble:
    """A CPU copy of replica k's n members (k·n … k·n + n - 1) of a stacked ensemble, as an ensemble of their own."""
    out = copy.deepcopy(ens).cpu()
    for name, p in out.named_parameters():
        p.set_(p[k * n:(k + 1) * n].clone())
    return out


def device_epoch_rows(split_rows: torch.Tensor, lengths: torch.Tensor, size: int, gens: Sequence[torch.Generator],
                      n_steps: int, batch_size: int) -> torch.Tensor:
    """One epoch's minibatch rows of every member, drawn on the rows' device: each member's split (a row of
    `split_rows` [R·K, L], valid up to its `lengths`) in a random order from its replica's generator (`gens`, one per
    replica, K members each), cut to `size` rows and padded with row 0 to n_steps · batch_size; returns
    [n_steps, R·K, batch_size] (the epoch's last minibatch holds size - (n_steps - 1) · batch_size real rows)."""
    n_members, width = split_rows.shape
    k = n_members // len(gens)
    keys = torch.cat([torch.rand(k, width, generator=g, device=split_rows.device) for g in gens])
    keys = keys.masked_fill(torch.arange(width, device=split_rows.device) >= lengths[:, None], 2.0)  # padding last
    rows = split_rows.gather(1, keys.argsort(-1)[:, :size])
    rows = F.pad(rows, (0, n_steps * batch_size - size))
    return rows.view(n_members, n_steps, batch_size).transpose(0, 1)


@contract.all_or_nothing
def main(args: Args) -> dict:
    check_args(args, n_policies=checks.COUNT, n_rounds=checks.COUNT, epochs=checks.COUNT)
    runs, data, meta, spec = seed_runs(args, ref)  # one reference Args per seed, the shared dataset
    _, augmented, _ = training_rows(data)
    method = args.method or ("bcnd_ca" if augmented.any() else "bcnd")
    N, K, R = len(data["rewards"]), args.n_policies, len(runs)
    if N < K:
        raise ValueError(f"{args.dataset}: {N} rows are too few for K={K} disjoint splits")
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"

    rngs = [np.random.default_rng(a.seed) for a in runs]  # each replica's split (and, on the CPU, its minibatches)
    streams = TorchStreams([a.seed for a in runs])  # each replica's initialisations and evaluation layers
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    splits = [ref.split_rows(rng, N, K) for rng in rngs]  # replica k's D_1 … D_K
    size = min(len(s) for s in splits[0])
    steps_per_epoch = math.ceil(size / args.batch_size)
    tail = size - (steps_per_epoch - 1) * args.batch_size  # rows of an epoch's last minibatch
    epochs = ref.epochs_per_round(args, steps_per_epoch)
    total = args.n_rounds * epochs * steps_per_epoch
    log_r = torch.zeros(R, N, device=device)  # log R⁰ ≡ 0 of every replica
    owner = torch.arange(R, device=device).repeat_interleave(K)[:, None]  # the replica of every member [R·K, 1]
    print(f"{method}: {N} rows ({augmented.sum()} augmented) in K={K} splits of ≥{size}, M={args.n_rounds} rounds × "
          f"{epochs} epochs = {total} batched steps ({args.dataset}), seeds {[a.seed for a in runs]} side by side"
          + (", each step a CUDA graph" if graphed else ""))

    if samples_on_device(device):  # each replica's device generator, an epoch at a time
        gens = [minibatch_generator(a.seed, device) for a in runs]
        members = [s for split in splits for s in split]
        split_tensor = torch.zeros(R * K, max(len(s) for s in members), dtype=torch.long)
        for i, s in enumerate(members):
            split_tensor[i, :len(s)] = torch.as_tensor(s)
        split_tensor = split_tensor.to(device)
        lengths = torch.as_tensor([len(s) for s in members], device=device)

        def draw(n):
            return device_epoch_rows(split_tensor, lengths, size, gens, n, args.batch_size)
    else:  # numpy's default_rng(k), as the reference draws them
        def draw(n):  # the reference's epoch_rows of every replica, padded to n minibatches
            rows = torch.as_tensor(np.concatenate([ref.epoch_rows(rng, split, size) for rng, split in zip(rngs, splits)]))
            rows = F.pad(rows, (0, n * args.batch_size - size)).to(device)
            return rows.view(R * K, n, args.batch_size).transpose(0, 1)
    chunks = IndexChunks(draw, chunk=steps_per_epoch)  # an epoch's minibatches at a time

    def new_ensemble() -> ref.GaussianEnsemble:
        """A fresh ensemble of every replica's K members, each replica's drawn from its own torch stream."""
        fresh = []
        for k in range(R):
            with streams.use(k):
                fresh.append(ref.GaussianEnsemble(K, meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden))
        return stack_members(fresh).to(device)

    def step_fn(idx, key=None):
        if key == "tail":
            idx = idx[:, :tail]
        w = ref.batch_weights(log_r[owner, idx])  # [R·K, B]: R^{m-1} of the member's replica, normalised per batch
        log_pi = ens.log_prob(obs[idx], act[idx])  # [R·K, B]
        loss = per_replica(ref.ensemble_loss, log_pi.view(R, K, -1), w.view(R, K, -1))  # [R]: each replica's loss
        opt.zero_grad()
        loss.sum().backward()  # replica k's slice of the gradient is ∂loss_k alone
        opt.step()
        return loss

    logs = [start(a, method, total) for a in runs]
    rows_of = [[] for _ in runs]
    trace, t0, step = [], time.time(), 0
    for m in range(1, args.n_rounds + 1):
        ens = new_ensemble()
        opt = torch.optim.AdamW(ens.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                                **({"capturable": True} if graphed else {}))
        step_once = GraphedStep(step_fn, graphed)  # this round's ensemble and optimiser: graphs captured anew
        for _ in range(epochs * steps_per_epoch):
            idx = chunks.next()
            last_of_epoch = step % steps_per_epoch == steps_per_epoch - 1
            loss = step_once(idx, "tail" if last_of_epoch and tail < args.batch_size else None)
            step += 1
            if step <= args.loss_trace:
                trace.append(loss.detach().clone())
            logs[0].tick(step, lambda: {"round": m, "loss": loss.mean().item() / K})
        losses = [x / K for x in loss.tolist()]  # the round's last step, read before anything else runs
        with torch.no_grad():  # R^m = (1/K) Σ_k π_k of every row, per replica, in log space: [R, N]
            log_r = torch.cat([per_replica(ref.ensemble_log_density,
                                           ens.log_prob(obs[i:i + 4096].expand(R * K, -1, -1),
                                                        act[i:i + 4096].expand(R * K, -1, -1)).view(R, K, -1))
                               for i in range(0, N, 4096)], -1)
        rets = []
        for k in range(R):
            with streams.use(k):  # an evaluation builds layers from torch's generator, as the single run's does
                rets.append(in_training_eval(replica_members(ens, k, K), norm, spec, args.eval_episodes,
                                             args.eval_seed) if is_eval_step(args, m, args.n_rounds) else float("nan"))
        w_all = ref.batch_weights(log_r)
        cols = {"loss": losses, "log_r_mean": log_r.mean(-1).tolist(), "log_r_std": log_r.std(-1).tolist(),
                "weight_max": w_all.max(-1).values.tolist(),
                "ess_frac": [x / N for x in (w_all.sum(-1) ** 2 / (w_all ** 2).sum(-1)).tolist()], "eval_return": rets}
        log_replicas(rows_of, [r.progress for r in logs], runs, m, cols, f"{method} round", key="round")
        mean = {name: float(np.mean(col)) for name, col in cols.items()}
        print(f"[{method} x{R}] round {m}/{args.n_rounds}  loss {mean['loss']:.3f}  log R {mean['log_r_mean']:.2f} ± "
              f"{mean['log_r_std']:.2f}  effective sample share {mean['ess_frac']:.2f}  eval return "
              f"{mean['eval_return']:.2f}  {time.time() - t0:.0f} s", flush=True)
    trace = torch.stack(trace).T.tolist() if trace else [[] for _ in runs]
    for k, a in enumerate(runs):
        finish(logs[k], a, spec, artifact(replica_members(ens, k, K), norm, **run_facts(a, data, method)))
    return {"method": method, "runs": [{"seed": a.seed, "log": rows_of[k], "log_r": log_r[k].cpu().numpy(),
                                        "loss_trace": [x / K for x in trace[k]]} for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
