"""The policy every trainer learns, how it is saved, and how it is scored.

* `Actor`: the tanh-Gaussian policy of the official DWBC code (2×256 ReLU, heads μ ∈ [-9, 9] and log σ ∈ [-5, 2],
  π = tanh(N(μ, σ))) on normalised observations, actions in [-1, 1]; `bc_loss` is its negative log-likelihood.
  BC-exp, BC-all, DWBC/OILCA, ORIL, LobsDICE and the augmentation sampler π̂_E all use it, so they differ only in
  the weights of their losses.
* `Normalizer`: observation standardisation with the training rows' mean/std (+1e-3, as DWBC) and the map of
  actions between their bounds and [-1, 1].
* `artifact`: the self-contained policy artifact (docs/contract.md) of the actor's deterministic head: with it,
  evaluate.py rolls a policy out without the script that trained it.
* `in_training_eval`: the learning-curve return during training; `evaluate_and_save` / `final_eval`: the one
  result JSON per (policy, split) that evaluate.py and every trainer's `--final-eval` write, and report.py reads.
* Seeds side by side (`--seeds` of every policy trainer): `replica_args` gives each seed the Args of a run with
  `--seed k` alone; `stack_replicas` turns R networks of one class into one network whose every nn.Linear is a
  `BatchedLinear` ([R, B, in] -> [R, B, out], one batched matmul), so the class's own forward and `log_prob` run
  the R replicas at once; `load_replica` copies replica k back into its plain module (for evaluation and the
  artifact); `minibatch_generator` is a replica's device generator for minibatch indices on a GPU; `TorchStreams`
  gives each replica the stream of torch's global generator that its single run would draw from.
* Budgets: `check_checkpoints` validates a trainer's `--checkpoints` (policies also saved at earlier steps, as
  `policy_step<N>.pt`, so one run to the largest budget gives every smaller budget's policy: with a constant
  learning rate and the same minibatch stream, the policy at step N of a long run is the policy of an N-step run).
* On a GPU (BC and DWBC/OILCA), `IndexChunks` draws the minibatch indices of many steps at once on the device, and
  with `--cuda-graph` `GraphedStep` replays one training step as a CUDA graph, so a step costs a few kernel launches
  on the host instead of about two hundred.

A trainer that needs another policy class (BCND's Gaussian ensemble) defines it in its own file and still saves it
through `contract.policy_artifact`, so evaluation never depends on the trainer.
"""

import contextlib
import copy
import dataclasses
import os
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

import checks
import contract
import envs

LOG_STD_MIN, LOG_STD_MAX, MU_MAX, ACT_EPS = -5.0, 2.0, 9.0, 1e-6
EVAL_SEED = 10_000  # final evaluation seed: apart from the data seeds and the in-training evaluation seed 50_000


class Actor(nn.Module):
    """Tanh-Gaussian policy on normalised observations; actions live in [-1, 1]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256, n_hidden: int = 2, act_eps: float = ACT_EPS):
        super().__init__()
        self.act_eps = act_eps  # likelihoods clip actions to ±(1 - act_eps)
        layers, d = [], obs_dim
        for _ in range(n_hidden):
            layers += [nn.Linear(d, hidden), nn.ReLU()]
            d = hidden
        self.trunk = nn.Sequential(*layers)
        self.mu = nn.Linear(d, act_dim)
        self.log_std = nn.Linear(d, act_dim)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.mu(h).clamp(-MU_MAX, MU_MAX), self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def log_prob(self, obs, act):
        """Per-dimension log π_j(a_j | s) [B, act_dim] of actions in [-1, 1] (clipped away from ±1)."""
        mu, log_std = self(obs)
        a = act.clamp(-1 + self.act_eps, 1 - self.act_eps)
        pre = torch.atanh(a)
        log_normal = -0.5 * (((pre - mu) / log_std.exp()) ** 2 + 2 * log_std + np.log(2 * np.pi))
        return log_normal - torch.log(1 - a ** 2 + self.act_eps)

    def mean_net(self) -> nn.Sequential:
        """The deterministic head (trunk + μ) for the policy artifact; the artifact applies the tanh."""
        return nn.Sequential(*self.trunk, self.mu)


def bc_loss(actor: Actor, obs, act):
    """Negative log-likelihood, summed over action dims and averaged over the batch: a scalar for [B, dim] inputs,
    one loss per replica [R] for a stacked actor's [R, B, dim]."""
    return -actor.log_prob(obs, act).sum(-1).mean(-1)


class BatchedLinear(nn.Module):
    """R independent linear layers in one batched matmul, [R, B, in] -> [R, B, out]. Built from R nn.Linear
    modules (weights transposed to [R, in, out], biases [R, 1, out] or none), so replica k starts as its own layer."""

    def __init__(self, linears: Sequence[nn.Linear]):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([lin.weight.detach().T for lin in linears]).contiguous())
        has_bias = linears[0].bias is not None
        self.bias = (nn.Parameter(torch.stack([lin.bias.detach() for lin in linears]).unsqueeze(1).contiguous())
                     if has_bias else None)

    def forward(self, x):
        return torch.bmm(x, self.weight) if self.bias is None else torch.baddbmm(self.bias, x, self.weight)


def stack_replicas(modules: Sequence[nn.Module]) -> nn.Module:
    """One module computing R networks of the same class side by side: a copy of modules[0] whose every nn.Linear
    is a BatchedLinear of the R modules' layers. Its methods (Actor.forward, Actor.log_prob, …) then take inputs
    [R, B, dim] and return [R, B, …], since every other op of these networks (ReLU, clamp, cat or sum over the last
    dim) acts row by row. Replica k's parameters are slices [k] of the stacked ones: its gradient of a summed loss
    Σ_k L_k is ∂L_k alone, and Adam is elementwise, so the replicas train independently."""
    stacked = copy.deepcopy(modules[0])
    for name, m in modules[0].named_modules():
        if isinstance(m, nn.Linear):
            parent, _, attr = name.rpartition(".")
            setattr(stacked.get_submodule(parent), attr, BatchedLinear([mod.get_submodule(name) for mod in modules]))
    return stacked


@torch.no_grad()
def load_replica(module: nn.Module, stacked: nn.Module, k: int) -> nn.Module:
    """Copy replica k of `stacked` (from stack_replicas) into `module`, a plain network of the same class; returns it."""
    for name, m in stacked.named_modules():
        if isinstance(m, BatchedLinear):
            lin = module.get_submodule(name)
            lin.weight.copy_(m.weight[k].T)
            if m.bias is not None:
                lin.bias.copy_(m.bias[k, 0])
    return module


class TorchStreams:
    """Each replica's own stream of torch's global CPU generator, started as `torch.manual_seed(k)` starts it in a
    run with `--seed k` alone. Code inside `with streams.use(k):` draws what that run draws at the same point:
    initialisations, noise (LobsDICE's mixing weights), and the layers an in-training evaluation builds
    (contract.build_policy), which shift every later draw of the run. The global generator is restored after."""

    def __init__(self, seeds: Sequence[int]):
        self.states = [torch.Generator().manual_seed(int(s)).get_state() for s in seeds]

    @contextlib.contextmanager
    def use(self, k: int):
        outside = torch.get_rng_state()
        torch.set_rng_state(self.states[k])
        try:
            yield
        finally:
            self.states[k] = torch.get_rng_state()
            torch.set_rng_state(outside)


def build_replicas(make: Callable[[], nn.Module], streams: TorchStreams, device) -> Tuple[nn.Module, List[nn.Module]]:
    """One network per replica, made by `make()` on the replica's torch stream (as `--seed k` alone makes it), on
    `device`: the plain network for one replica, the replicas stacked side by side (stack_replicas) for several.
    Returns the network to train and the plain per-replica modules (where load_replica copies a replica back)."""
    nets = []
    for k in range(len(streams.states)):
        with streams.use(k):
            nets.append(make())
    return (nets[0] if len(nets) == 1 else stack_replicas(nets)).to(device), nets


def replica_values(x: torch.Tensor) -> list:
    """A logged quantity as one float per replica: a scalar for one seed, [R] for several."""
    return x.reshape(-1).tolist()


def log_replicas(logs: List[list], progs: Sequence, runs: Sequence, step: int, cols: dict, method: str,
                 key: str = "step") -> None:
    """One logged row per replica: {key: step, name: cols[name][k], …} appended to logs[k] and to replica k's
    progress.csv (progs[k]), after checks.finite_losses stops the run at a non-finite value."""
    for k, a in enumerate(runs):
        logs[k].append({key: step, **{name: col[k] for name, col in cols.items()}})
        checks.finite_losses(logs[k][-1], step, method + (f" (seed {a.seed})" if len(runs) > 1 else ""))
        progs[k].log(logs[k][-1])  # progress.csv, flushed now


def replica_args(args) -> List:
    """One Args per training seed, `args.seeds` or else `args.seed`, each as `--seed k` alone would have it: seed = k,
    seeds = None, `{seed}` in out_dir and final_eval (and in dataset, where a trainer allows one dataset per seed)
    replaced by k. Several seeds need `{seed}` in out_dir and final_eval."""
    seeds = list(args.seeds) if args.seeds else [args.seed]
    if len(seeds) > 1:
        if len(set(seeds)) < len(seeds):
            raise ValueError(f"--seeds must be distinct, got {seeds}")
        for flag, path in (("--out-dir", args.out_dir), ("--final-eval", args.final_eval)):
            if path is not None and "{seed}" not in path:
                raise ValueError(f"with several --seeds, {flag} must contain {{seed}} (got {path})")

    def sub(path, k):
        return path if path is None else path.replace("{seed}", str(k))

    extra = lambda k: {"dataset": sub(args.dataset, k)} if getattr(args, "dataset", None) else {}  # noqa: E731
    return [dataclasses.replace(args, seed=k, seeds=None, out_dir=sub(args.out_dir, k), final_eval=sub(args.final_eval, k),
                                **extra(k)) for k in seeds]


def minibatch_generator(seed: int, device: torch.device) -> Optional[torch.Generator]:
    """On a GPU, a replica's own generator for minibatch indices, seeded by its seed, so indices are drawn on the
    device (no host round trip); on the CPU None: numpy's default_rng(seed) draws them, as it always has."""
    return torch.Generator(device=device).manual_seed(seed) if device.type == "cuda" else None


def check_checkpoints(checkpoints: Sequence[int], total_steps: int) -> List[int]:
    """`--checkpoints`: distinct steps in [1, --total-steps); a one-line ValueError otherwise. Returns them sorted."""
    steps = sorted(set(int(c) for c in checkpoints))
    if len(steps) != len(checkpoints) or any(not 1 <= c < total_steps for c in steps):
        raise ValueError(f"--checkpoints {' '.join(map(str, checkpoints))}: need distinct steps between 1 and "
                         f"--total-steps - 1 ({total_steps - 1})")
    return steps


def recorded_args(args) -> dict:
    """A trainer's Args as its args.json and artifact record them: `--checkpoints` as a list, and the options that
    change nothing in the result (`--checkpoints`, `--cuda-graph`) left out when unused, so runs made before these
    options existed keep identical records."""
    out = dataclasses.asdict(args)
    for name, unused in (("checkpoints", ()), ("cuda_graph", False)):
        if name in out:
            if tuple(out[name]) == unused if name == "checkpoints" else out[name] == unused:
                del out[name]
            elif name == "checkpoints":
                out[name] = list(out[name])
    return out


def checkpoint_name(step: int) -> str:
    """The file of the policy saved at `step` by `--checkpoints` (beside policy.pt in the run folder)."""
    return f"policy_step{step}.pt"


class IndexChunks:
    """Minibatch indices on a GPU: `draw(n)` returns the indices of the next n steps at once ([n, …] on the device,
    from the replicas' own device generators); `next()` hands them out one step at a time, refilling every `chunk`
    steps. The eager and the graphed GPU loop (--cuda-graph) read the same stream, so they take the same steps."""

    def __init__(self, draw: Callable[[int], torch.Tensor], chunk: int = 1000):
        self.draw, self.chunk, self.buf, self.i = draw, chunk, None, 0

    def next(self) -> torch.Tensor:
        if self.buf is None or self.i == len(self.buf):
            self.buf, self.i = self.draw(self.chunk), 0
        self.i += 1
        return self.buf[self.i - 1]


class GraphedStep:
    """One training step, `fn(idx, key)` on the minibatch row indices `idx` (returning its logged tensors), run as a
    CUDA graph: each call copies its `idx` into the graph's fixed input buffer; the first `warmup` calls of each `key`
    (e.g. "with" or "without the discriminator update") run eagerly on a side stream (as real training steps: they
    create the optimisers' state), the next one captures the step in a graph (with its own memory pool) and replays
    it, and every later call replays it. The returned tensors are the graph's static outputs: read them before the
    next call. The optimisers must be built with capturable=True. With `enabled=False` (a CPU, or no --cuda-graph)
    it just calls fn(idx, key)."""

    def __init__(self, fn: Callable[[torch.Tensor, object], tuple], enabled: bool, warmup: int = 3):
        self.fn, self.enabled, self.warmup = fn, enabled, warmup
        self.seen: dict = {}
        self.graphs: dict = {}
        self.idx: Optional[torch.Tensor] = None  # the graphs' input buffer
        self.stream = torch.cuda.Stream() if enabled else None

    def __call__(self, idx: torch.Tensor, key=None):
        if not self.enabled:
            return self.fn(idx, key)
        if self.idx is None:
            self.idx = idx.clone()
        else:
            self.idx.copy_(idx)
        if key in self.graphs:
            graph, outs = self.graphs[key]
            graph.replay()
            return outs
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        if n < self.warmup:
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                outs = self.fn(self.idx, key)
            torch.cuda.current_stream().wait_stream(self.stream)
            return outs
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = self.fn(self.idx, key)
        self.graphs[key] = (graph, outs)
        graph.replay()  # the capture only recorded the step: run it
        return outs


def cpu_threads(threads: Optional[int]) -> int:
    """`--threads`, or by default every core this process may run on."""
    if threads:
        return threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Normalizer:
    """Observation standardisation (+1e-3 as in DWBC) and the map of actions between their bounds and [-1, 1]."""

    def __init__(self, obs: np.ndarray, low, high):
        self.mean, self.std = obs.mean(0), obs.std(0) + 1e-3
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)
        if not (np.isfinite(self.mean).all() and np.isfinite(self.std).all()):  # the data contract bounds values
            raise ValueError("observation mean/std are not finite: the observations are too large for float32")
        if not (self.high > self.low).all():
            raise ValueError(f"action bounds: high {self.high.tolist()} must exceed low {self.low.tolist()}")

    def obs(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std).astype(np.float32)

    def act(self, a: np.ndarray) -> np.ndarray:
        return (2 * (a - self.low) / (self.high - self.low) - 1).astype(np.float32)


def artifact(actor: nn.Module, norm: Normalizer, **info) -> dict:
    """The policy artifact (docs/contract.md) of the actor's deterministic head (`actor.mean_net()`)."""
    return contract.policy_artifact(actor.mean_net(), norm.mean, norm.std, norm.low, norm.high, **info)


def in_training_eval(actor: nn.Module, norm: Normalizer, spec: dict, episodes: int, seed: int) -> float:
    """Mean return of the current deterministic policy on the env's first split (the training classes, or
    CausalWorld's space A), through the same artifact and rollout as the final evaluation; NaN with episodes = 0
    (no rollout: e.g. training on a GPU machine without the env installed, evaluating afterwards)."""
    if episodes <= 0:
        return float("nan")
    policy = contract.build_policy(artifact(actor, norm))
    split = envs.default_splits(spec)[0]
    return float(envs.rollout(spec, policy, split, envs.split_classes(spec, split), episodes, seed)["returns"].mean())


def check_dims(path: str, art: dict, spec: dict) -> None:
    """A policy artifact must fit the env it is rolled out on."""
    cfg = art["config"]
    if (cfg["obs_dim"], cfg["act_dim"]) != (spec["obs_dim"], spec["act_dim"]):
        raise contract.ContractError(
            f"{path}: policy expects obs_dim={cfg['obs_dim']}, act_dim={cfg['act_dim']} but env '{spec['env_id']}' "
            f"has obs_dim={spec['obs_dim']}, act_dim={spec['act_dim']}")


def evaluate_and_save(policy: Callable, info: dict, spec: dict, split: str, classes: Optional[Sequence[int]],
                      episodes: int, seed: int, out: str, args: dict) -> dict:
    """Roll `policy` out on one split and write its result JSON to `out` (`{split}` in it becomes the split).

    `info` describes the policy: method, seed (its training seed), dataset_fingerprint, and optionally policy (its
    path), train_args and augmented_de_over_du, as recorded in its artifact. `classes` overrides the split's classes.
    The JSON holds the per-episode returns (and CausalWorld's fractional success), so report.py can re-aggregate."""
    chosen = envs.split_classes(spec, split, classes)
    res = envs.rollout(spec, policy, split, chosen, episodes, seed)
    returns, ep_classes = np.asarray(res["returns"]), res["episode_classes"]
    if not np.isfinite(returns).all() or (res.get("success") is not None and not np.isfinite(res["success"]).all()):
        raise ValueError(f"{info.get('policy') or info['method']}: the rollouts on {split} returned NaN or inf; "
                         f"no result written")
    split = split if not classes else "classes_" + "_".join(map(str, chosen))
    result = {"method": info["method"], "seed": info["seed"], "env": spec["env_id"], "split": split,
              "classes": chosen, "returns": returns.tolist(),
              "episode_classes": None if ep_classes is None else np.asarray(ep_classes).tolist(),
              "mean_return": float(returns.mean()), "std_return": float(returns.std()), "episodes": episodes,
              "eval_seed": seed, "policy": info.get("policy"), "dataset_fingerprint": info["dataset_fingerprint"],
              "args": args, "train_args": info.get("train_args", {}),
              "augmented_de_over_du": info.get("augmented_de_over_du")}
    if info.get("policy_step") is not None:
        result["policy_step"] = info["policy_step"]
    if res.get("success") is not None:
        result.update(success=np.asarray(res["success"]).tolist(), mean_success=float(np.mean(res["success"])))
    path = out.replace("{split}", split)
    contract.save_json(path, result)
    extra = f", fractional success {result['mean_success']:.3f}" if "mean_success" in result else ""
    print(f"{result['method']} (seed {result['seed']}) on {spec['env_id']} {split} classes {chosen}: "
          f"return {returns.mean():.2f} ± {returns.std():.2f}{extra} over {episodes} episodes -> {path}")
    return result


def artifact_info(art: dict, path: Optional[str]) -> dict:
    """What a result JSON records about the policy artifact it scores."""
    info = {"method": art["method"], "seed": art["seed"], "dataset_fingerprint": art["dataset_fingerprint"],
            "policy": path, "train_args": art.get("train_args", {}),
            "augmented_de_over_du": art.get("augmented_de_over_du")}
    if art.get("checkpoint_step") is not None:  # a --checkpoints policy: trained this many steps of total_steps
        info["policy_step"] = int(art["checkpoint_step"])
    return info


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
