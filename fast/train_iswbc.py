"""The fast path of train_iswbc.py: several seeds side by side in one process, rows and mixing noise drawn on the GPU,
each step replayed as a CUDA graph. The method is train_iswbc.py's (its Args, discriminator, losses, weights and
diagnostics are imported from it); this file only runs R replicas of it at once.

    python fast/train_iswbc.py --seeds 0 1 2 3 4 --out-dir "runs/iswbc_s{seed}" --cuda --cuda-graph

Replica k builds its discriminator and then its actor on its own stream of torch's generator (TorchStreams), as
`train_iswbc.py --seed k` builds them after torch.manual_seed(k); it draws its rows from its own default_rng(k) and its
mixing weights λ and shuffle from that stream, with the reference's calls, and evaluates on that stream too (an
evaluation builds layers from it); it has its own slice of the Adam moments. So on a CPU it follows the reference run
up to float rounding (tests/test_fast_iswbc.py). On a GPU its rows, λ and shuffle come from its own device generator
instead (the shuffle as an argsort of uniforms), 1,000 steps at a time. Every loss is the reference's plain loss
applied per replica (per_replica: torch.vmap); the input gradient of the gradient penalty (ref.input_gradient) runs
on the stacked discriminator directly, since no op of it mixes rows.

--cuda-graph: the whole step (both forward passes, the penalty's double backward, both Adam steps) is one graph; it
has static shapes and no host-side branching (--version and --tau are fixed for the run). Eager, outside it: the
logged diagnostics and rollouts at evaluation steps, the loss trace, and the refill of the index/noise chunks.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_iswbc as ref  # noqa: E402
from fast.replicas import (FastArgs, GraphedStep, IndexChunks, load_replica, minibatch_generator,  # noqa: E402
                           per_replica, samples_on_device, seed_runs, stack_replicas, TorchStreams)
from oilca import contract  # noqa: E402
from training.trainer import (Actor, artifact, finish, in_training_eval, is_eval_step, Normalizer, run_cli,  # noqa: E402
                              run_facts, setup, start, training_rows)


@dataclass
class Args(ref.Args, FastArgs):
    pass


@contract.all_or_nothing
def main(args: Args) -> dict:
    ref.check_tau(args)
    runs, data, meta, spec = seed_runs(args, ref, ref.RULES, expert=True)  # one reference Args per seed
    _, aug, _ = training_rows(data)
    method = args.method or ("iswbc_ca" if aug.any() else "iswbc")
    exp_rows = np.flatnonzero(data["expert"])  # D_E: the collected expert rows and the counterfactual rows
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"
    norm = Normalizer(data["observations"][ref.norm_rows(data, runs[0])], meta["action_low"], meta["action_high"])
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    pool = torch.as_tensor(exp_rows, device=device)
    N, B, R = len(obs), args.batch_size, len(runs)
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), union {N} rows ({args.dataset}), seeds "
          f"{[a.seed for a in runs]} side by side" + (", each step a CUDA graph" if graphed else ""))

    streams = TorchStreams([a.seed for a in runs])
    discs, actors = [], []
    for k in range(R):  # replica k built as `train_iswbc.py --seed k` builds its networks: discriminator, then actor
        with streams.use(k):
            discs.append(ref.discriminator(meta["obs_dim"] + meta["act_dim"], args.hidden, args.n_hidden))
            actors.append(Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps))
    disc, actor = stack_replicas(discs).to(device), stack_replicas(actors).to(device)
    capturable = {"capturable": True} if graphed else {}
    disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr, **capturable)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, **capturable)

    # Each step's draws: idx [R, 3B] (rows of D_E, rows of U, a shuffle of the batch) and λ [R, B, 1].
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]

    def host_draw():
        """The CPU: each replica's draws with the reference's calls (numpy for rows, its torch stream for noise)."""
        idx, lam = [], []
        for k in range(R):
            rows = np.concatenate([rngs[k].choice(exp_rows, B), rngs[k].integers(0, N, B)])
            with streams.use(k):
                lam_k, perm_k = torch.rand(B, 1), torch.randperm(B)
            idx.append(torch.cat([torch.as_tensor(rows), perm_k]))
            lam.append(lam_k)
        return torch.stack(idx).to(device), torch.stack(lam).to(device)

    def device_rows(n: int):  # [n, R, 3B]: n steps of rows and shuffles, from each replica's device generator
        return torch.stack([torch.cat([pool[torch.randint(len(pool), (n, B), generator=g, device=device)],
                                       torch.randint(0, N, (n, B), generator=g, device=device),
                                       torch.rand(n, B, generator=g, device=device).argsort(-1)], -1)
                            for g in gens], 1)

    def device_lam(n: int):  # [n, R, B, 1]: n steps of mixing weights λ
        return torch.stack([torch.rand(n, B, 1, generator=g, device=device) for g in gens], 1)

    chunks = (IndexChunks(device_rows), IndexChunks(device_lam)) if samples_on_device(device) else None
    lam_buf = torch.zeros(R, B, 1, device=device)  # the step's λ, read by the (graphed) step as idx is

    def step_fn(idx, _key=None):
        ie, iu, perm = idx.split(B, -1)  # [R, B] each
        x_e = torch.cat([obs[ie], act[ie]], -1)  # [R, B, obs_dim + act_dim]
        x_u = torch.cat([obs[iu], act[iu]], -1)
        c_e, c_u = disc(x_e).squeeze(-1), disc(x_u).squeeze(-1)
        x_u_perm = torch.take_along_dim(x_u, perm.unsqueeze(-1), dim=-2)  # x_u[perm], per replica
        x_mix = torch.cat([lam_buf * x_e + (1 - lam_buf) * x_u, lam_buf * x_u_perm + (1 - lam_buf) * x_u], -2)
        grad = ref.input_gradient(disc, x_mix)  # [R, 2B, d]: each row's own gradient
        c_loss = per_replica(ref.disc_loss, c_e, c_u) + args.grad_penalty * per_replica(ref.penalty_of_gradient, grad)
        w = per_replica(ref.importance_weights, c_u, args.version)
        p_loss = per_replica(ref.weighted_nll, actor.log_prob(obs[iu], act[iu]).sum(-1), w, args.tau)
        disc_opt.zero_grad()
        actor_opt.zero_grad()
        (c_loss + p_loss).sum().backward()  # replica k's slice of each gradient is ∂(its own loss) alone
        disc_opt.step()
        actor_opt.step()
        return c_loss.detach(), p_loss.detach(), c_e.detach(), c_u.detach(), w  # w is detached already

    def replica(k: int) -> Actor:
        return load_replica(actors[k], actor, k)

    step_once = GraphedStep(step_fn, graphed)
    logs = [start(a, method, args.total_steps) for a in runs]
    trace = []
    kept = torch.zeros(R, device=device)  # union rows that passed τ per replica, over the run (read at the end)
    for step in range(1, args.total_steps + 1):
        idx, lam = (chunks[0].next(), chunks[1].next()) if chunks is not None else host_draw()
        lam_buf.copy_(lam)
        c_loss, p_loss, c_e, c_u, w = step_once(idx)
        if args.tau > 0:  # with τ = 0 every row counts: nothing to watch
            kept += (w >= args.tau).sum(-1)
        if step <= args.loss_trace:
            trace.append(torch.stack([c_loss, p_loss]))  # a new tensor: the graph's outputs change at the next step
        if is_eval_step(args, step, args.total_steps):
            cols = {"disc_loss": c_loss, "policy_loss": p_loss, **per_replica(ref.diagnostics, c_e, c_u, w)}
            cols = {name: v.tolist() for name, v in cols.items()}
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the reference's does
                    ret = in_training_eval(replica(k), norm, spec, args.eval_episodes, args.eval_seed)
                logs[k].log(step, {**{name: col[k] for name, col in cols.items()}, "eval_return": ret})
        else:
            logs[0].tick(step, lambda: {"disc_loss": c_loss.mean().item(), "policy_loss": p_loss.mean().item()})
    trace = torch.stack(trace).permute(2, 1, 0).tolist() if trace else [[[], []] for _ in runs]  # [R, 2, steps]
    for n in kept.tolist():  # any replica that never trained its policy: the whole run is refused
        ref.check_trained(args.tau, n)
    for k in range(R):
        finish(logs[k], runs[k], spec, artifact(replica(k).cpu(), norm, **run_facts(runs[k], data, method)))
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k].log_rows,
                                        "loss_trace": {"disc_loss": trace[k][0], "policy_loss": trace[k][1]}}
                                       for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
