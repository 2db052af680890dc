"""The fast path's machinery: seeds side by side in one process, minibatch sampling on the device, CUDA graphs.

Nothing here is a method. A fast trainer (fast/train_<method>.py) imports its method's networks, losses and data
loading from the reference trainer (train_<method>.py) and runs R replicas of it at once:

* `stack_replicas` turns R networks of one class into one network whose every nn.Linear is a `BatchedLinear`
  ([R, B, in] -> [R, B, out], one batched matmul), so the class's own forward and `log_prob` run the R replicas at
  once; `load_replica` copies replica k back into its plain module (for evaluation and the artifact);
  `build_replicas` makes the R networks on each replica's own torch stream (`TorchStreams`).
* `per_replica(loss)` applies a reference trainer's plain loss (a scalar over a [B, …] batch) to each replica's
  slice of [R, B, …] inputs with torch.vmap, giving [R]: the reference's loss is the one source of truth and never
  needs to know about replicas. Summing the [R] losses and calling backward gives replica k the gradient ∂L_k alone
  (its parameters are slices [k] of the stacked ones), and Adam is elementwise, so replicas train independently.
* `replica_args` gives each seed the Args of a reference run with `--seed k` alone; `minibatch_generator` is a
  replica's device generator for minibatch indices on a GPU; `IndexChunks` draws the indices of many steps at once
  on the device; `GraphedStep` replays one training step as a CUDA graph, so a step costs a few kernel launches on
  the host instead of about two hundred.

The contract (tests/test_replicas.py): replica k of a fast run and the reference run with seed k give the same
losses to 1e-5 over 100 steps, for every method.
"""

import contextlib
import copy
import dataclasses
import os
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from oilca import checks, contract
from training.trainer import check_args, final_eval_paths, load


@dataclass
class FastArgs:
    """Flags of the fast path, added to a reference trainer's Args by its fast trainer."""
    seeds: Tuple[int, ...] = (0,)
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); with several, --out-dir
    and --final-eval need `{seed}`, which becomes each replica's seed"""
    cuda_graph: bool = False
    """with --cuda on a GPU: replay each training step as a CUDA graph (a step of these small networks is otherwise
    bound by kernel launches); the same steps as without it, up to float rounding; ignored on a CPU"""


def per_replica(fn: Callable, *args, in_dims=None):
    """fn (a reference trainer's loss over one replica's batch) applied to every replica: tensor arguments carry the
    replica dimension first ([R, …]), other arguments (floats, flags) are shared. Returns fn's output with [R] in
    front. `in_dims` overrides the default (0 for tensors, None for the rest)."""
    dims = in_dims if in_dims is not None else tuple(0 if torch.is_tensor(a) else None for a in args)
    return torch.vmap(fn, in_dims=dims)(*args)


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
    """R networks, replica k's made by `make()` on its own torch stream (as the reference run with seed k makes it, in
    the reference's order of networks), stacked side by side (stack_replicas) on `device`, also for R = 1. Returns
    the stacked network to train and the plain per-replica modules (where load_replica copies a replica back)."""
    nets = []
    for k in range(len(streams.states)):
        with streams.use(k):
            nets.append(make())
    return stack_replicas(nets).to(device), nets


def log_replicas(logs: List[list], progs: Sequence, runs: Sequence, step: int, cols: dict, method: str,
                 key: str = "step") -> None:
    """One logged row per replica: {key: step, name: cols[name][k], …} appended to logs[k] and to replica k's
    progress.csv (progs[k]), after checks.finite_losses stops the run at a non-finite value."""
    for k, a in enumerate(runs):
        logs[k].append({key: step, **{name: col[k] for name, col in cols.items()}})
        checks.finite_losses(logs[k][-1], step, method + (f" (seed {a.seed})" if len(runs) > 1 else ""))
        progs[k].log(logs[k][-1])  # progress.csv, flushed now


def replica_args(args, base_cls) -> List:
    """One reference Args (`base_cls`) per seed of a fast run's `args.seeds`, each as `--seed k` alone would have it:
    seed = k, `{seed}` in out_dir and final_eval (and in dataset, where a trainer allows one dataset per seed)
    replaced by k. Several seeds need `{seed}` in out_dir and final_eval."""
    seeds = list(args.seeds)
    if not seeds:
        raise ValueError("--seeds: give at least one seed")
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"--seeds must be distinct, got {seeds}")
    if len(seeds) > 1:
        for flag, path in (("--out-dir", args.out_dir), ("--final-eval", args.final_eval)):
            if path is not None and "{seed}" not in path:
                raise ValueError(f"with several --seeds, {flag} must contain {{seed}} (got {path})")

    def sub(path, k):
        return path if path is None else path.replace("{seed}", str(k))

    names = {f.name for f in dataclasses.fields(base_cls)}
    own = {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name in names}
    return [base_cls(**{**own, "seed": k, "out_dir": sub(args.out_dir, k), "final_eval": sub(args.final_eval, k),
                        "dataset": sub(args.dataset, k)}) for k in seeds]


def seed_runs(args, ref, rules: Optional[dict] = None, expert: bool = False):
    """The start of every fast trainer: one reference Args per seed (checked by the reference's rules), the one
    dataset they share (loaded and validated; with `expert` it must hold D_E), its metadata and env, and every seed's
    outputs checked before training. Returns (runs, data, meta, spec). `ref` is the reference trainer's module."""
    runs = replica_args(args, ref.Args)
    for a in runs:
        check_args(a, **(rules or {}))
    if len({a.dataset for a in runs}) > 1:
        raise ValueError(f"--dataset {args.dataset}: {os.path.basename(ref.__file__)} trains on one dataset for every "
                         f"seed")
    data, meta, spec = load(runs[0].dataset)
    if expert:
        contract.require_expert(data, runs[0].dataset)
    contract.check_paths({"--dataset": runs[0].dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    return runs, data, meta, spec


def samples_on_device(device: torch.device) -> bool:
    """Whether minibatch indices are drawn on the device (a GPU) rather than by numpy (the CPU, as the reference)."""
    return device.type == "cuda"


def minibatch_generator(seed: int, device: torch.device) -> Optional[torch.Generator]:
    """On a GPU, a replica's own generator for minibatch indices, seeded by its seed, so indices are drawn on the
    device (no host round trip); on the CPU None: numpy's default_rng(seed) draws them, as the reference does."""
    return torch.Generator(device=device).manual_seed(seed) if device.type == "cuda" else None


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
