"""The fast path of train_bc.py: several seeds side by side in one process, minibatches drawn on the GPU, each
step replayed as a CUDA graph. The method is train_bc.py's (its Args, rows, actor and loss are imported from it);
this file only runs R replicas of it at once.

    python fast/train_bc.py --seeds 0 1 2 3 4 --out-dir "runs/bc_exp_s{seed}" --cuda --cuda-graph

Replica k is initialised as `train_bc.py --seed k` is, draws its minibatches from its own default_rng(k) with the
same calls (on a GPU from its own device generator instead, 1,000 steps at a time), and has its own slice of the Adam
moments, so on a CPU it follows the reference run up to float rounding (tests/test_replicas.py); it writes that
run's files to `--out-dir` and `--final-eval` with `{seed}` replaced by k.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_bc as ref  # noqa: E402
from fast.replicas import (FastArgs, GraphedStep, IndexChunks, load_replica, minibatch_generator,  # noqa: E402
                           per_replica, samples_on_device, seed_runs, stack_replicas)
from oilca import contract  # noqa: E402
from training.trainer import (Actor, artifact, check_checkpoints, checkpoint_name, finish, in_training_eval,  # noqa: E402
                              is_eval_step, nll, Normalizer, run_cli, run_facts, setup, start)


@dataclass
class Args(ref.Args, FastArgs):
    pass


@contract.all_or_nothing
def main(args: Args) -> dict:
    args = ref.with_out_dir(args)  # train_bc.py's default --out-dir
    runs, data, meta, spec = seed_runs(args, ref, None)  # one reference Args per seed
    checkpoints = check_checkpoints(args.checkpoints, args.total_steps)
    rows = ref.cloned_rows(data, runs[0])
    method = args.method or f"bc_{args.data if args.data == 'all' else 'exp'}"
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"
    norm = Normalizer(data["observations"][rows], meta["action_low"], meta["action_high"])
    obs = torch.as_tensor(norm.obs(data["observations"][rows]), device=device)
    act = torch.as_tensor(norm.act(data["actions"][rows]), device=device)
    R = len(runs)
    print(f"{method}: cloning {rows.sum()} rows of {args.dataset} ({contract.describe(data)}), seeds "
          f"{[a.seed for a in runs]} side by side" + (", each step a CUDA graph" if graphed else ""))

    actors = []
    for a in runs:  # replica k built as `train_bc.py --seed k` builds its actor
        torch.manual_seed(a.seed)
        actors.append(Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps))
    net = stack_replicas(actors).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                           **({"capturable": True} if graphed else {}))
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    chunks = IndexChunks(lambda n: torch.stack([torch.randint(0, len(obs), (n, args.batch_size), generator=g,
                                                              device=device) for g in gens], 1)) \
        if samples_on_device(device) else None

    def step_fn(idx, _key=None):
        loss = per_replica(nll, net.log_prob(obs[idx], act[idx]))  # [R]: the reference's loss of each replica
        opt.zero_grad()
        loss.sum().backward()  # replica k's slice of the gradient is ∂loss_k alone
        opt.step()
        return loss

    def replica(k: int) -> Actor:
        return load_replica(actors[k], net, k)

    def policy_artifact(k: int, **extra) -> dict:
        return artifact(replica(k).cpu(), norm, **run_facts(runs[k], data, method, **extra))

    step_once = GraphedStep(step_fn, graphed)
    logs = [start(a, method, args.total_steps) for a in runs]
    trace = []
    for step in range(1, args.total_steps + 1):
        if chunks is not None:
            idx = chunks.next()
        else:
            idx = torch.stack([torch.as_tensor(r.integers(0, len(obs), args.batch_size), device=device) for r in rngs])
        loss = step_once(idx)
        if step <= args.loss_trace:
            trace.append(loss.detach().clone())
        if step in checkpoints:
            for k in range(R):
                contract.save_policy(logs[k].staged(checkpoint_name(step)), policy_artifact(k, checkpoint_step=step))
        if is_eval_step(args, step, args.total_steps):
            losses = loss.tolist()
            for k in range(R):
                ret = in_training_eval(replica(k), norm, spec, args.eval_episodes, args.eval_seed)
                logs[k].log(step, {"loss": losses[k], "eval_return": ret})
        else:
            logs[0].tick(step, lambda: {"loss": loss.mean().item()})
    trace = torch.stack(trace).T.tolist() if trace else [[] for _ in runs]
    for k in range(R):
        finish(logs[k], runs[k], spec, policy_artifact(k))
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k].log_rows, "loss_trace": trace[k]}
                                       for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
