"""The fast path of train_lobsdice.py: several seeds side by side in one process, rows and noise drawn on the GPU,
each step replayed as a CUDA graph. The method is train_lobsdice.py's (its Args, rows, networks, losses and draws are
imported from it); this file only runs R replicas of it at once.

    python fast/train_lobsdice.py --seeds 0 1 2 3 4 --out-dir "runs/lobsdice_s{seed}" --cuda --cuda-graph

The cost, ν and the actor are each R networks stacked into one (stack_replicas), and every loss is the reference's
applied to each replica's slice (per_replica), one value per replica [R]. Replica k is `train_lobsdice.py --seed k`:
its networks are built on its own stream of torch's global generator (TorchStreams: started as torch.manual_seed(k)
starts it, in the reference's order cost, ν, actor); on the CPU it draws its rows from default_rng(k) and its mixing
noise (λ, the shuffle, λ2) from that stream with the reference's own calls, and its in-training evaluations build
their layers on that stream too, so it draws what the reference run draws in the same order. With its own slice of
the Adam moments it follows the reference run up to float rounding (tests/test_fast_lobsdice.py); it writes that
run's files to `--out-dir` and `--final-eval` with `{seed}` replaced by k.

On a GPU (--cuda) the data stays on the device and each replica's own device generator (seeded by k; not the
reference's draws) draws the rows, shuffles and mixing weights of 1,000 steps at a time. With --cuda-graph the whole
training step is one CUDA graph (GraphedStep): the three networks' forward passes, both gradient penalties with their
double backward, and the three Adam steps have static shapes and no host-side branching. The rows and shuffles enter
through the graph's index buffer, the mixing weights through a fixed buffer filled before each replay. Eager: the
draws of each 1,000-step chunk, and the in-training evaluations and logging (host-side, at --eval-every steps).
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_lobsdice as ref  # noqa: E402
from fast.replicas import (build_replicas, FastArgs, GraphedStep, IndexChunks, load_replica, minibatch_generator,  # noqa: E402
                           per_replica, samples_on_device, seed_runs, TorchStreams)
from oilca import contract  # noqa: E402
from training.trainer import (transition_tensors, Actor, artifact, finish, in_training_eval, is_eval_step, Normalizer, run_cli,  # noqa: E402
                              run_facts, setup, start)

LOSSES = ("cost_loss", "nu_loss", "policy_loss")


@dataclass
class Args(ref.Args, FastArgs):
    pass


@contract.all_or_nothing
def main(args: Args) -> dict:
    runs, data, meta, spec = seed_runs(args, ref, ref.RULES, expert=True)  # one reference Args per seed
    exp_rows, unl_rows, init_rows, aug = ref.lobsdice_rows(data)
    if len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert)")
    method = args.method or ("lobsdice_ca" if aug.any() else "lobsdice")
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"
    norm = Normalizer(data["observations"][unl_rows], meta["action_low"], meta["action_high"])
    obs, next_obs, act = transition_tensors(data, norm, device)
    obs_dim, act_dim, N, B, R = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size, len(runs)
    print(f"{method}: expert (s, s') {len(exp_rows)} rows ({aug.sum()} augmented), union {N} rows, "
          f"{len(init_rows)} initial states ({args.dataset}), seeds {[a.seed for a in runs]} side by side"
          + (", each step a CUDA graph" if graphed else ""))

    streams = TorchStreams([a.seed for a in runs])  # replica k's torch generator, as torch.manual_seed(k) starts it

    def replicas(make):  # replica k's networks made on its own stream, in the reference's order
        return build_replicas(make, streams, device)

    cost, _ = replicas(lambda: ref.critic(2 * obs_dim, args.hidden, args.n_hidden))
    nu, _ = replicas(lambda: ref.critic(obs_dim, args.hidden, args.n_hidden))
    actor, actors = replicas(lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps))
    cap = {"capturable": True} if graphed else {}
    cost_opt = torch.optim.Adam(cost.parameters(), lr=args.cost_lr, **cap)
    nu_opt = torch.optim.Adam(nu.parameters(), lr=args.nu_lr, **cap)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, **cap)

    # A step's draws: rows and shuffle idx [R, 4B] (expert, union, initial, shuffle) and mixing weights [R, 2B, 1]
    if samples_on_device(device):  # each replica's device generator, 1,000 steps at a time
        gens = [minibatch_generator(a.seed, device) for a in runs]
        pools = [torch.as_tensor(rows, device=device) for rows in (exp_rows, init_rows)]

        def device_rows(g, n):
            def pick(pool):
                return pool[torch.randint(len(pool), (n, B), generator=g, device=device)]
            return torch.cat([pick(pools[0]), torch.randint(0, N, (n, B), generator=g, device=device), pick(pools[1]),
                              torch.rand(n, B, generator=g, device=device).argsort(-1)], -1)

        row_chunks = IndexChunks(lambda n: torch.stack([device_rows(g, n) for g in gens], 1))
        noise_chunks = IndexChunks(lambda n: torch.stack([torch.rand(n, 2 * B, 1, generator=g, device=device)
                                                          for g in gens], 1))

        def draw():
            return row_chunks.next(), noise_chunks.next()
    else:  # the reference's calls: rows from numpy's default_rng(k), noise from replica k's torch stream
        rngs = [np.random.default_rng(a.seed) for a in runs]

        def draw():
            idx, lams = [], []
            for k in range(R):
                rows = torch.as_tensor(ref.draw_rows(rngs[k], exp_rows, init_rows, N, B))
                with streams.use(k):
                    lam, perm, lam2 = ref.mixing_noise(B)
                idx.append(torch.cat([rows, perm]))
                lams.append(torch.cat([lam, lam2]))
            return torch.stack(idx).to(device), torch.stack(lams).to(device)

    noise = torch.zeros(R, 2 * B, 1, device=device)  # this step's λ, λ2: a fixed buffer the CUDA graph reads

    def step_fn(idx, _key=None):
        ie, iu, i0, perm = idx.split(B, -1)  # [R, B] each
        lam, lam2 = noise.split(B, 1)  # [R, B, 1] each
        x_e = torch.cat([obs[ie], next_obs[ie]], -1)
        x_u = torch.cat([obs[iu], next_obs[iu]], -1)
        c_e, c_u = cost(x_e).squeeze(-1), cost(x_u).squeeze(-1)
        x_u_perm = torch.take_along_dim(x_u, perm.unsqueeze(-1), dim=-2)  # x_u[perm], per replica
        x_mix = torch.cat([lam * x_e + (1 - lam) * x_u, lam * x_u_perm + (1 - lam) * x_u], -2)
        grad_r = ref.input_gradient(lambda x: ref.cost_of_logit(cost(x)), x_mix)  # each replica's rows' own gradients
        c_loss = per_replica(ref.cost_loss, c_e, c_u) + args.cost_gp * per_replica(ref.norm_penalty, grad_r, 1.0)
        r_u = ref.cost_of_logit(c_u)
        nu_all = nu(torch.cat([obs[i0], obs[iu], next_obs[iu]], -2)).squeeze(-1)
        adv = ref.advantage(r_u, nu_all[:, B:2 * B], nu_all[:, 2 * B:], args.gamma)
        s_mix = torch.cat([obs[iu], lam2 * obs[ie] + (1 - lam2) * obs[iu],
                           lam2 * next_obs[ie] + (1 - lam2) * next_obs[iu]], -2)
        n_loss = (per_replica(ref.nu_loss, nu_all[:, :B], adv, args.gamma, args.alpha)
                  + args.nu_gp * per_replica(ref.norm_penalty, ref.input_gradient(nu, s_mix), None))
        w = per_replica(ref.policy_weights, adv, args.alpha)
        p_loss = per_replica(ref.policy_loss, w, actor.log_prob(obs[iu], act[iu]))
        for opt in (cost_opt, nu_opt, actor_opt):
            opt.zero_grad()
        (c_loss + n_loss + p_loss).sum().backward()  # replica k's slice of each gradient is its own losses'
        for opt in (cost_opt, nu_opt, actor_opt):
            opt.step()
        stats = per_replica(ref.diagnostics, c_e.detach(), r_u.detach(), adv.detach(), w)
        return {"cost_loss": c_loss.detach(), "nu_loss": n_loss.detach(), "policy_loss": p_loss.detach(), **stats}

    def replica(k: int) -> Actor:
        return load_replica(actors[k], actor, k)

    step_once = GraphedStep(step_fn, graphed)
    logs = [start(a, method, args.total_steps) for a in runs]
    trace = []
    for step in range(1, args.total_steps + 1):
        idx, lams = draw()
        noise.copy_(lams)
        out = step_once(idx)  # {name: [R]}; with --cuda-graph the graph's outputs, read before the next step
        if step <= args.loss_trace:
            trace.append(torch.stack([out[name] for name in LOSSES]).clone())
        if is_eval_step(args, step, args.total_steps):
            cols = {name: x.tolist() for name, x in out.items()}
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the reference run's does
                    ret = in_training_eval(replica(k), norm, spec, args.eval_episodes, args.eval_seed)
                logs[k].log(step, {**{name: col[k] for name, col in cols.items()}, "eval_return": ret})
        else:
            logs[0].tick(step, lambda: {name: out[name].mean().item() for name in LOSSES})
    trace = torch.stack(trace).permute(2, 1, 0).tolist() if trace else [[[] for _ in LOSSES] for _ in runs]  # [R][3][T]
    for k in range(R):
        finish(logs[k], runs[k], spec, artifact(replica(k).cpu(), norm, **run_facts(runs[k], data, method)))
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k].log_rows,
                                        "loss_trace": dict(zip(LOSSES, trace[k]))} for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
