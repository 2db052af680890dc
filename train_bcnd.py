"""BCND baseline (Sasaki & Yamashina, ICLR 2021, "Behavioral Cloning from Noisy Demonstrations"): behaviour
cloning from D_all without expert labels, where each round re-weights the data by how likely the previous
ensemble finds its action. On an augmented dataset (augment.py) this is BCND+CA (OILCA Table 4): the
counterfactual rows are added to the data.

Algorithm (paper Alg. 1):
  1. split the training rows at random into K disjoint subsets D_1 … D_K, and set R⁰ ≡ 1;
  2. for m = 1 … M: for each k, train π_k from a fresh initialisation on D_k by weighted maximum likelihood,
         θ_k = argmax E_{D_k}[R^{m-1}(s, a) · log π_k(a | s)],
     then R^m(s, a) = (1/K) Σ_k π_k(a | s), the ensemble's mean density of the data action;
  3. the policy is the last round's ensemble.
R is kept in log space, log R = logsumexp_k log π_k(a | s) - log K, because densities span orders of magnitude,
and normalised per batch to mean 1: w_i = B · softmax_i(log R) over the batch (round 1 is plain BC).

Members are Gaussian policies on the action itself with a tanh-bounded mean, π_k(a | s) = N(a; tanh(μ_k(s)),
diag σ_k²), μ_k: 2×256 ReLU, with a state-independent log σ_k initialised at 0, as in the public re-implementation.
Not the tanh-Gaussian of BC/DWBC: behaviour actions are often clipped at exactly ±1, and under a tanh-Gaussian
their density sits at atanh(±(1 - ε)), far in the tail, so R would give every clipped row a weight near 0 and the
later rounds would unlearn saturated actions (on the tuning data the first version's return fell round by round,
-7.7, -10.1, -14.4, with clipped rows at 3% of the mean weight). The K members train side by side as one batched
network. The saved policy acts with tanh(mean_k μ_k(s)) (the re-implementation averages the members' sampled
actions), exported as one block-diagonal MLP (the K members side by side, the last layer averaging them), so
evaluate.py runs it like any other policy.

Cost: M rounds × K members × `epochs` passes over |D_all| / K rows, i.e. M · epochs passes over D_all in all
(defaults 5 × 100 = 500 passes, 5 × 100 × ⌈3000/256⌉ = 6,000 batched steps of K = 5 members on the toy data).

Input: a dataset `.npz` (docs/contract.md): observations, actions (expert labels are not used).
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (per round: loss, weight spread,
eval return; written as it goes), args.json, and with --tensorboard the event files in tb/. policy.pt and args.json
are moved into --out-dir together when the run completes; a run whose loss turns NaN or inf stops and writes nothing.
Progress: a line at most every ~10 s (batched step, steps/s, ETA, round, last loss), besides the line of every round.

Several seeds at once and CUDA graphs: fast/train_bcnd.py (same ensemble, losses and data helpers, imported).
"""

import math
import time
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from training.trainer import (LOG_STD_MAX, LOG_STD_MIN, MU_MAX, Normalizer, TrainerArgs, artifact, check_args, checks,
                           check_outputs, finish, in_training_eval, is_eval_step, load, run_cli, run_facts, setup,
                           start, rows_tensor, training_rows)


@dataclass
class Args(TrainerArgs):
    out_dir: str = "runs/bcnd"
    """folder for policy.pt, progress.csv and args.json"""
    eval_every: int = 1
    """evaluate after every this many rounds (0: after the last round only)"""
    n_policies: int = 5
    """K, policies in the ensemble, each trained on its own disjoint split of the data"""
    n_rounds: int = 5
    """M, rounds of re-weighting (round 1 is plain BC)"""
    epochs: int = 100
    """passes of every member over its split in every round (toy: 100 × 5 rounds × ⌈3000/256⌉ = 6,000 batched steps)"""
    total_steps: Optional[int] = None
    """a step budget instead of --epochs, to match the other methods' gradient steps: epochs per round =
    ⌈total_steps / (n_rounds · ⌈|D_k| / batch_size⌉)⌉ (toy, 5,000 steps: ⌈5000 / (5 · 12)⌉ = 84 epochs)"""
    batch_size: int = 256
    """minibatch size of every member"""
    lr: float = 1e-3
    """Adam learning rate"""
    weight_decay: float = 0.0
    """Adam (decoupled, AdamW) weight decay"""
    hidden: int = 256
    """hidden width of every member"""
    n_hidden: int = 2
    """hidden layers of every member"""


class GaussianEnsemble(nn.Module):
    """K Gaussian policies π_k(a | s) = N(a; tanh(μ_k(s)), diag σ_k²) with μ ∈ [-9, 9] and a state-independent
    log σ ∈ [-5, 2], computed side by side as one batched network; inputs are [K, B, obs_dim]."""

    def __init__(self, k: int, obs_dim: int, act_dim: int, hidden: int = 256, n_hidden: int = 2):
        super().__init__()
        sizes = [obs_dim] + [hidden] * n_hidden + [act_dim]
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        for d_in, d_out in zip(sizes[:-1], sizes[1:]):
            bound = 1 / math.sqrt(d_in)  # nn.Linear's default initialisation, per member
            self.weights.append(nn.Parameter(torch.empty(k, d_in, d_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(k, 1, d_out).uniform_(-bound, bound)))
        self.log_std = nn.Parameter(torch.zeros(k, 1, act_dim))  # state-independent, initialised at 0

    def forward(self, obs):
        x = obs
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)
            if i < len(self.weights) - 1:
                x = torch.relu(x)
        return x.clamp(-MU_MAX, MU_MAX), self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def log_prob(self, obs, act):
        """log π_k(a | s) [K, B] of actions in [-1, 1], summed over dims: a Gaussian around tanh(μ_k(s)), so
        actions clipped at ±1 keep a density comparable to their neighbours'."""
        mu, log_std = self(obs)
        return (-0.5 * (((act - torch.tanh(mu)) / log_std.exp()) ** 2 + 2 * log_std + math.log(2 * math.pi))).sum(-1)

    def mean_net(self) -> nn.Sequential:
        """The ensemble's deterministic head as one plain MLP on the CPU: the members side by side (block-diagonal
        hidden layers), the last layer averaging their μ_k. The artifact applies the tanh: action = tanh(mean_k μ_k)."""
        k = self.weights[0].shape[0]
        layers = []
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            w, b = w.detach().cpu(), b.detach().cpu()
            first, last = i == 0, i == len(self.weights) - 1
            d_in, d_out = w.shape[1:]
            lin = nn.Linear(d_in if first else k * d_in, d_out if last else k * d_out)
            with torch.no_grad():
                lin.weight.zero_()
                for j in range(k):
                    rows = slice(None) if last else slice(j * d_out, (j + 1) * d_out)
                    cols = slice(None) if first else slice(j * d_in, (j + 1) * d_in)
                    lin.weight[rows, cols] += w[j].T / (k if last else 1)
                lin.bias.copy_(b.mean(0)[0] if last else b[:, 0].reshape(-1))
            layers += [lin] if last else [lin, nn.ReLU()]
        return nn.Sequential(*layers)


def ensemble_log_density(log_probs):
    """log R = log (1/K) Σ_k π_k(a | s) from member log densities [..., K, N] → [..., N]."""
    return torch.logsumexp(log_probs, -2) - math.log(log_probs.shape[-2])


def batch_weights(log_r):
    """Per-batch normalised weights w = B · softmax(log R) (mean 1, computed in log space) [..., B]."""
    return log_r.shape[-1] * torch.softmax(log_r, -1)


def weighted_nll(log_pi, weights):
    """-E[w · log π(a | s)] of every member [K] from log π [K, B] and weights [K, B] (detached)."""
    return -(weights.detach() * log_pi).mean(-1)


def ensemble_loss(log_pi, weights):
    """The ensemble's loss Σ_k -E_{D_k}[w · log π_k(a | s)] (a scalar): the members' weighted NLLs summed, so each
    member's slice of the gradient is its own loss's."""
    return weighted_nll(log_pi, weights).sum()


def split_rows(rng: np.random.Generator, n: int, k: int) -> List[np.ndarray]:
    """D_1 … D_K: the row indices 0 … n - 1 in a random order, cut into k disjoint parts of near-equal size."""
    return np.array_split(rng.permutation(n), k)


def epoch_rows(rng: np.random.Generator, splits: List[np.ndarray], size: int) -> np.ndarray:
    """One epoch's rows of every member [K, size]: its split in a fresh random order, cut to `size` rows (the
    smallest split's), so the members step together."""
    return np.stack([rng.permutation(s)[:size] for s in splits])


def epochs_per_round(args: Args, steps_per_epoch: int) -> int:
    """--epochs, or with --total-steps the epochs per round that spend that budget over --n-rounds rounds."""
    return math.ceil(args.total_steps / (args.n_rounds * steps_per_epoch)) if args.total_steps else args.epochs


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    check_args(args, n_policies=checks.COUNT, n_rounds=checks.COUNT, epochs=checks.COUNT)
    data, meta, spec = load(args.dataset)
    check_outputs(args, spec)
    _, augmented, _ = training_rows(data)
    method = args.method or ("bcnd_ca" if augmented.any() else "bcnd")
    N, K = len(data["rewards"]), args.n_policies
    if N < K:
        raise ValueError(f"{args.dataset}: {N} rows are too few for K={K} disjoint splits")
    device = setup(args)

    torch.manual_seed(args.seed)  # every round's initialisation, and the layers the evaluations build
    rng = np.random.default_rng(args.seed)  # the split and the minibatches
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])  # every training row
    obs = rows_tensor(data["observations"], norm.obs, device)
    act = rows_tensor(data["actions"], norm.act, device)
    splits = split_rows(rng, N, K)  # disjoint D_1 … D_K (Alg. 1, step 1)
    size = min(len(s) for s in splits)  # rows of every member per epoch
    steps_per_epoch = math.ceil(size / args.batch_size)
    epochs = epochs_per_round(args, steps_per_epoch)
    total = args.n_rounds * epochs * steps_per_epoch
    log_r = torch.zeros(N, device=device)  # log R⁰ ≡ 0: round 1 is plain BC
    print(f"{method}: {N} rows ({augmented.sum()} augmented) in K={K} splits of ≥{size}, M={args.n_rounds} rounds × "
          f"{epochs} epochs = {total} batched steps ({args.dataset})")

    run = start(args, method, total)
    log, trace, t0, step = [], [], time.time(), 0
    for m in range(1, args.n_rounds + 1):
        # every π_k from a fresh initialisation (Alg. 1, step 2)
        ens = GaussianEnsemble(K, meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden).to(device)
        opt = torch.optim.AdamW(ens.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        for _ in range(epochs):
            rows = torch.as_tensor(epoch_rows(rng, splits, size), device=device)  # [K, size]: member k's rows of D_k
            for j in range(steps_per_epoch):
                idx = rows[:, j * args.batch_size:(j + 1) * args.batch_size]  # [K, B]
                w = batch_weights(log_r[idx])  # R^{m-1}(s, a), normalised per batch to mean 1
                loss = ensemble_loss(ens.log_prob(obs[idx], act[idx]), w)  # Σ_k -E_{D_k}[R^{m-1} · log π_k(a | s)]
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                if step <= args.loss_trace:
                    trace.append(loss.item() / K)
                run.tick(step, lambda: {"round": m, "loss": loss.item() / K})  # read when a line is due
        with torch.no_grad():  # R^m(s, a) = (1/K) Σ_k π_k(a | s) of every row, in log space
            log_r = torch.cat([ensemble_log_density(ens.log_prob(obs[i:i + 4096].expand(K, -1, -1),
                                                                 act[i:i + 4096].expand(K, -1, -1)))
                               for i in range(0, N, 4096)])
        ret = (in_training_eval(ens, norm, spec, args.eval_episodes, args.eval_seed)
               if is_eval_step(args, m, args.n_rounds) else float("nan"))
        w_all = batch_weights(log_r)  # the weights over every row: their spread and effective sample share
        row = {"round": m, "loss": loss.item() / K, "log_r_mean": log_r.mean().item(), "log_r_std": log_r.std().item(),
               "weight_max": w_all.max().item(), "ess_frac": (w_all.sum() ** 2 / (w_all ** 2).sum()).item() / N,
               "eval_return": ret}
        checks.finite_losses(row, m, f"{method} round")  # stops the run (nothing saved) at a NaN or inf value
        log.append(row)
        run.progress.log(row)  # a row of progress.csv per round
        print(f"[{method}] round {m}/{args.n_rounds}  loss {row['loss']:.3f}  log R {row['log_r_mean']:.2f} ± "
              f"{row['log_r_std']:.2f}  effective sample share {row['ess_frac']:.2f}  eval return {ret:.2f}  "
              f"{time.time() - t0:.0f} s", flush=True)
    # the policy is the last round's ensemble (Alg. 1, step 3)
    finish(run, args, spec, artifact(ens.cpu(), norm, **run_facts(args, data, method)))
    return {"method": method, "seed": args.seed, "log": log, "log_r": log_r.cpu().numpy(),  # log R^M of every row
            "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
