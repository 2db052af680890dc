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
eval return; written as it goes), args.json, and with --tensorboard the event files in tb/.
Progress: a line at most every ~10 s (batched step, steps/s, ETA, round, last loss), besides the line of every round.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process, as one ensemble
of R·K members (replica k's K members next to each other), each replica with its own split, initialisations and
weights R, so replica k follows the run with `--seed k` alone up to float rounding and writes that run's files to
`--out-dir` and `--final-eval` with `{seed}` replaced by k.
"""

import copy
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from oilca.policy import (LOG_STD_MAX, LOG_STD_MIN, MU_MAX, Normalizer, TorchStreams, artifact, cpu_threads, final_eval,
                    final_eval_paths, in_training_eval, log_replicas, replica_args)
from oilca.progress import Progress


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset: raw (BCND) or augmented by augment.py (BCND+CA)"""
    out_dir: str = "runs/bcnd"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy (default: bcnd_ca on an augmented dataset, else bcnd)"""
    seed: int = 0
    """seed of the split, the initialisations and the minibatches"""
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
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
    eval_every: int = 1
    """evaluate after every this many rounds (0: after the last round only)"""
    eval_episodes: int = 20
    """episodes of those evaluations (training classes of c, or CausalWorld's space A)"""
    eval_seed: int = 50_000
    """seed of the evaluations during training (apart from the final evaluation seeds)"""
    final_eval: Optional[str] = None
    """after training, evaluate the saved policy (as evaluate.py does) and write its JSON here; `{split}` becomes train/heldout"""
    final_eval_episodes: int = 100
    """episodes per split of that final evaluation"""
    tensorboard: bool = False
    """also write TensorBoard event files of the logged rows and progress lines to <out_dir>/tb"""
    threads: Optional[int] = None
    """torch CPU threads (default: every core this process may use; runner.py passes cores // --jobs)"""
    cuda: bool = False
    """use CUDA when available"""


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

    @classmethod
    def concat(cls, ensembles) -> "GaussianEnsemble":
        """One ensemble of all the members of several (their parameters concatenated, in order)."""
        out = copy.deepcopy(ensembles[0])
        with torch.no_grad():
            for name, p in out.named_parameters():
                p.set_(torch.cat([e.get_parameter(name) for e in ensembles]).detach().clone())
        return out

    def members(self, lo: int, hi: int) -> "GaussianEnsemble":
        """A copy of members lo … hi - 1 as an ensemble of their own (a replica's K members, for its artifact)."""
        out = copy.deepcopy(self)
        with torch.no_grad():
            for name, p in out.named_parameters():
                p.set_(p[lo:hi].detach().clone())
        return out

    def mean_net(self) -> nn.Sequential:
        """The ensemble's deterministic head as one plain MLP: the members side by side (block-diagonal hidden
        layers), the last layer averaging their μ_k. The artifact applies the tanh: action = tanh(mean_k μ_k)."""
        k = self.weights[0].shape[0]
        layers = []
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
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
    """-E[w · log π(a | s)] of every member [K], weights detached; the ensemble's loss is their sum."""
    return -(weights.detach() * log_pi).mean(-1)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, n_policies=checks.COUNT, n_rounds=checks.COUNT, epochs=checks.COUNT)
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    data = envs.load_dataset(args.dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    method = args.method or ("bcnd_ca" if aug.any() else "bcnd")
    N, K, R = len(data["rewards"]), args.n_policies, len(runs)
    if N < K:
        raise ValueError(f"{args.dataset}: {N} rows are too few for K={K} disjoint splits")
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # Several seeds (--seeds) train R replicas side by side as one ensemble of R·K members (replica k's members are
    # k·K … k·K + K - 1), each replica with its own split (numpy's default_rng(k)), its own initialisations (torch's
    # generator as seeded by k, policy.TorchStreams) and its own R; one seed is the case R = 1.
    rngs = [np.random.default_rng(a.seed) for a in runs]
    streams = TorchStreams([a.seed for a in runs])
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])  # every training row
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    splits = [np.array_split(rng.permutation(N), K) for rng in rngs]  # disjoint D_1 … D_K of every replica
    size = min(len(s) for s in splits[0])
    steps_per_epoch = math.ceil(size / args.batch_size)
    epochs = math.ceil(args.total_steps / (args.n_rounds * steps_per_epoch)) if args.total_steps else args.epochs
    log_r = torch.zeros(R, N, device=device)  # log R⁰ ≡ 0, a row per replica
    owner = torch.arange(R, device=device).repeat_interleave(K)[:, None]  # the replica of every member [R·K, 1]
    print(f"{method}: {N} rows ({aug.sum()} augmented) in K={K} splits of ≥{size}, M={args.n_rounds} rounds × "
          f"{epochs} epochs = {args.n_rounds * epochs * steps_per_epoch} batched steps ({args.dataset})"
          + (f", seeds {[a.seed for a in runs]} side by side" if R > 1 else ""))

    def new_ensemble() -> GaussianEnsemble:
        """A fresh ensemble of every replica's K members, each replica's drawn from its own torch stream."""
        members = []
        for k in range(R):
            with streams.use(k):
                members.append(GaussianEnsemble(K, meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden))
        return (members[0] if R == 1 else GaussianEnsemble.concat(members)).to(device)

    def replica(ens: GaussianEnsemble, k: int) -> GaussianEnsemble:
        return ens if R == 1 else ens.members(k * K, (k + 1) * K)

    logs, t0, step = [[] for _ in runs], time.time(), 0
    total = args.n_rounds * epochs * steps_per_epoch
    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    progs = [Progress(method, total, out_dir=a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", total)  # several seeds: means over replicas
    for m in range(1, args.n_rounds + 1):
        ens = new_ensemble()  # fresh initialisation every round
        opt = torch.optim.AdamW(ens.parameters(), lr=args.lr, weight_decay=args.weight_decay)
        for _ in range(epochs):
            # one epoch over every member's split: [R·K, size] rows, on the device once per epoch
            perms = torch.as_tensor(np.stack([rng.permutation(s)[:size] for rng, split in zip(rngs, splits) for s in split]),
                                    device=device)
            for j in range(steps_per_epoch):
                idx = perms[:, j * args.batch_size:(j + 1) * args.batch_size]
                w = batch_weights(log_r[owner, idx])  # R^{m-1} of the member's replica, normalised per batch
                member_loss = weighted_nll(ens.log_prob(obs[idx], act[idx]), w)  # [R·K]
                opt.zero_grad()
                member_loss.sum().backward()  # every member's slice of the gradient is its own loss's
                opt.step()
                step += 1
                line.update(step, lambda: {"round": m, "loss": member_loss.sum().item() / (R * K)})  # read when due
        with torch.no_grad():  # R^m(s, a) = (1/K) Σ_k π_k(a | s) on every row, in log space, per replica
            log_r = torch.cat([ensemble_log_density(ens.log_prob(obs[i].expand(R * K, -1, -1), act[i].expand(R * K, -1, -1))
                                                    .view(R, K, -1))
                               for i in torch.arange(N, device=device).split(4096)], -1)
        last = m == args.n_rounds
        rets = []
        for k in range(R):
            with streams.use(k):  # an evaluation builds layers from torch's generator, as the single run's does
                rets.append(in_training_eval(replica(ens, k), norm, spec, args.eval_episodes, args.eval_seed)
                            if last or (args.eval_every and m % args.eval_every == 0) else float("nan"))
        w_all = batch_weights(log_r)
        cols = {"loss": [x / K for x in member_loss.detach().view(R, K).sum(-1).tolist()],
                "log_r_mean": log_r.mean(-1).tolist(), "log_r_std": log_r.std(-1).tolist(),
                "weight_max": w_all.max(-1).values.tolist(),
                "ess_frac": [x / N for x in (w_all.sum(-1) ** 2 / (w_all ** 2).sum(-1)).tolist()], "eval_return": rets}
        log_replicas(logs, progs, runs, m, cols, f"{method} round", key="round")  # stops at a non-finite value
        mean = {name: float(np.mean(col)) for name, col in cols.items()}
        print(f"[{method}{f' x{R}' if R > 1 else ''}] round {m}/{args.n_rounds}  loss {mean['loss']:.3f}  log R "
              f"{mean['log_r_mean']:.2f} ± {mean['log_r_std']:.2f}  effective sample share {mean['ess_frac']:.2f}  "
              f"eval return {mean['eval_return']:.2f}  {time.time() - t0:.0f} s", flush=True)
    for prog in {id(p): p for p in progs + [line]}.values():
        prog.close()

    for k, a in enumerate(runs):
        contract.save_policy(os.path.join(folders[k].staging, "policy.pt"), artifact(
            replica(ens, k).cpu(), norm, method=method, seed=a.seed, env=spec,
            dataset_fingerprint=contract.fingerprint(data), dataset=a.dataset, train_args=asdict(a)))
        contract.save_json(os.path.join(folders[k].staging, "args.json"), asdict(a))
        folders[k].commit()  # policy.pt and args.json appear in --out-dir together, beside the run's progress.csv
        if a.final_eval:
            final_eval(os.path.join(a.out_dir, "policy.pt"), spec, a.final_eval_episodes, a.final_eval)
    # log R^M of every row, for diagnostics
    results = [{"seed": a.seed, "log": logs[k], "log_r": log_r[k].cpu().numpy()} for k, a in enumerate(runs)]
    return {"method": method, **results[0]} if R == 1 else {"method": method, "runs": results}


if __name__ == "__main__":
    cli.run(main, Args)
