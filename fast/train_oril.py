"""The fast path of train_oril.py: several seeds side by side in one process, minibatches drawn on the GPU, each
training step replayed as a CUDA graph. The method is train_oril.py's (its Args, rows, networks and losses are
imported from it); this file only runs R replicas of it at once.

    python fast/train_oril.py --seeds 0 1 2 3 4 --out-dir "runs/oril_s{seed}" --cuda --cuda-graph

Each of the five networks (reward model, actor, twin Q, its target, V) is the R replicas' networks stacked into one
(stack_replicas), and every loss is the reference's applied to each replica's slice (per_replica), one value per
replica [R]. Replica k is `train_oril.py --seed k`: its networks are built on its own stream of torch's global
generator (TorchStreams: started as torch.manual_seed(k) starts it, in the reference's order reward model, actor, Q,
Q̄, V), and its in-training evaluations build their layers on that stream too; on the CPU it draws its minibatches from
its own default_rng(k) with the reference's calls (stage 1 then stage 2), and it has its own slice of the Adam moments
and of the actor's cosine schedule, so it follows the reference run up to float rounding
(tests/test_fast_oril.py). It writes that run's files to `--out-dir` and `--final-eval` with `{seed}` replaced by k.

On a GPU (--cuda) the data stays on the device and each replica's own device generator (seeded by k; not the
reference's draws) draws the rows of 1,000 steps at a time (stage 1: B rows of D_E and B of D_U; stage 2: B rows of
D_all). With --cuda-graph (optimisers capturable=True) each step of both stages is a CUDA graph (GraphedStep): stage 1
the reward model's two forward passes, the PU loss and its Adam step; stage 2 the V, Q and policy updates and the
Polyak averaging of Q̄ (static shapes, no host-side branching). The actor's learning rate is then a device tensor that
the graph reads, and CosineAnnealingLR updates it in place between replays. Eager: the draws of each 1,000-step chunk,
the relabelling of D_all by the frozen reward model between the stages (one forward pass), the schedule's update,
and the in-training evaluations and logging (host-side, at --eval-every steps).
"""

import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_oril as ref  # noqa: E402
from fast.replicas import (build_replicas, FastArgs, GraphedStep, IndexChunks, load_replica, minibatch_generator,  # noqa: E402
                           per_replica, samples_on_device, seed_runs, TorchStreams)
from oilca import checks, contract  # noqa: E402
from training.trainer import (transition_tensors, Actor, artifact, finish, in_training_eval, is_eval_step, Normalizer, Progress,  # noqa: E402
                              run_cli, run_facts, setup, start)

IQL_LOSSES = ("v_loss", "q_loss", "actor_loss")


@dataclass
class Args(ref.Args, FastArgs):
    pass


@contract.all_or_nothing
def main(args: Args) -> dict:
    runs, data, meta, spec = seed_runs(args, ref, ref.RULES, expert=True)  # one reference Args per seed
    reward_steps = ref.reward_step_count(runs[0])
    exp_rows, unl_rows, aug = ref.pu_rows(data, runs[0].dataset)
    method = args.method or ("oril_ca" if aug.any() else "oril")
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])
    obs, next_obs, act = transition_tensors(data, norm, device)
    done = torch.as_tensor(data["terminals"], dtype=torch.float32, device=device)
    obs_dim, act_dim, N, B, R = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size, len(runs)
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), D_U {len(unl_rows)} rows ({args.dataset}), "
          f"seeds {[a.seed for a in runs]} side by side" + (", each step a CUDA graph" if graphed else ""))

    streams = TorchStreams([a.seed for a in runs])  # replica k's torch generator, as torch.manual_seed(k) starts it

    def replicas(make):  # replica k's networks made on its own stream, in the reference's order
        return build_replicas(make, streams, device)

    # A step's rows: stage 1 [R, 2B] (B of D_E, then B of D_U), stage 2 [R, B] (D_all)
    if samples_on_device(device):  # each replica's device generator, 1,000 steps at a time
        gens = [minibatch_generator(a.seed, device) for a in runs]
        pools = [torch.as_tensor(rows, device=device) for rows in (exp_rows, unl_rows)]

        def pick(g, pool, n):
            return pool[torch.randint(len(pool), (n, B), generator=g, device=device)]

        pu_chunks = IndexChunks(lambda n: torch.stack([torch.cat([pick(g, pools[0], n), pick(g, pools[1], n)], -1)
                                                       for g in gens], 1))
        iql_chunks = IndexChunks(lambda n: torch.stack([torch.randint(0, N, (n, B), generator=g, device=device)
                                                        for g in gens], 1))
        pu_batch, iql_batch = pu_chunks.next, iql_chunks.next
    else:  # the reference's calls on numpy's default_rng(k)
        rngs = [np.random.default_rng(a.seed) for a in runs]

        def pu_batch():
            return torch.stack([torch.as_tensor(np.concatenate([r.choice(exp_rows, B), r.choice(unl_rows, B)]))
                                for r in rngs]).to(device)

        def iql_batch():
            return torch.stack([torch.as_tensor(r.integers(0, N, B)) for r in rngs]).to(device)

    cap = {"capturable": True} if graphed else {}
    trace = {"reward_loss": [], "iql": []}
    t0 = time.time()

    # stage 1: the reward model, PU loss (ORIL Eq. 5)
    reward_model, _ = replicas(lambda: ref.RewardModel(obs_dim, act_dim, args.hidden, args.n_hidden))
    r_opt = torch.optim.Adam(reward_model.parameters(), lr=args.reward_lr, **cap)

    def reward_step(idx, _key=None):
        ie, iu = idx.split(B, -1)  # [R, B] each
        loss = per_replica(ref.pu_reward_loss, reward_model(obs[ie], act[ie]), reward_model(obs[iu], act[iu]),
                           args.eta, args.pu)  # [R]
        r_opt.zero_grad()
        loss.sum().backward()  # replica k's slice of the gradient is ∂loss_k alone
        r_opt.step()
        return loss.detach()

    reward_once = GraphedStep(reward_step, graphed)
    prog = Progress(f"{method} reward model x{R}", reward_steps)  # lines only
    for step in range(1, reward_steps + 1):
        r_loss = reward_once(pu_batch())
        if step <= args.loss_trace:
            trace["reward_loss"].append(r_loss.clone())
        prog.update(step, lambda: {"loss": r_loss.mean().item()})
    r_loss = r_loss.clone()  # the last step's losses (the graph's output buffer, kept for the logs)
    with torch.no_grad():  # relabel D_all once with each replica's frozen R_ψ: [R, N]
        reward = reward_model(obs.expand(R, -1, -1), act.expand(R, -1, -1))
    r_e, r_u = reward[:, exp_rows].mean(-1), reward[:, unl_rows].mean(-1)
    stage1 = {"reward_loss": r_loss.tolist(), "r_expert": r_e.tolist(), "r_unlabelled": r_u.tolist()}
    for k, a in enumerate(runs):
        checks.finite_losses({name: col[k] for name, col in stage1.items()}, reward_steps,
                             f"{method} reward model (seed {a.seed})")
    print(f"[{method}] reward model x{R}: {reward_steps} steps, loss {np.mean(stage1['reward_loss']):.3f}, mean R on "
          f"D_E {np.mean(stage1['r_expert']):.2f}, on D_U {np.mean(stage1['r_unlabelled']):.2f}  "
          f"({time.time() - t0:.0f} s)", flush=True)

    # stage 2: IQL on the relabelled data
    actor, actors = replicas(lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps))
    qf, _ = replicas(lambda: ref.TwinQ(obs_dim, act_dim, args.hidden, args.n_hidden))
    q_target, _ = replicas(lambda: ref.TwinQ(obs_dim, act_dim, args.hidden, args.n_hidden))
    q_target.load_state_dict(qf.state_dict())
    vf, _ = replicas(lambda: ref.mlp(obs_dim, args.hidden, args.n_hidden))
    q_opt = torch.optim.Adam(qf.parameters(), lr=args.critic_lr, **cap)
    v_opt = torch.optim.Adam(vf.parameters(), lr=args.critic_lr, **cap)
    # a CUDA graph reads the actor's lr from a device tensor, which the schedule then updates in place
    actor_lr = torch.tensor(args.actor_lr, device=device) if graphed else args.actor_lr
    actor_opt = torch.optim.Adam(actor.parameters(), lr=actor_lr, **cap)
    actor_sched = torch.optim.lr_scheduler.CosineAnnealingLR(actor_opt, args.total_steps)

    def iql_step(idx, _key=None):
        s, a, s2 = obs[idx], act[idx], next_obs[idx]  # [R, B, …]
        with torch.no_grad():
            q = torch.min(*q_target(s, a))
            next_v = vf(s2).squeeze(-1)
        v = vf(s).squeeze(-1)
        v_loss = per_replica(ref.expectile_loss, q, v, args.expectile)
        v_opt.zero_grad()
        v_loss.sum().backward()
        v_opt.step()
        c_loss = per_replica(ref.q_loss, *qf(s, a), reward.gather(1, idx), done[idx], next_v, args.gamma)
        q_opt.zero_grad()
        c_loss.sum().backward()
        q_opt.step()
        adv = q - v.detach()
        a_loss = per_replica(ref.awr_loss, actor.log_prob(s, a), adv, args.beta)
        actor_opt.zero_grad()
        a_loss.sum().backward()
        actor_opt.step()
        with torch.no_grad():
            for p, p_t in zip(qf.parameters(), q_target.parameters()):
                p_t.lerp_(p, args.polyak)
        return {"v_loss": v_loss.detach(), "q_loss": c_loss.detach(), "actor_loss": a_loss.detach(),
                "q_mean": q.mean(-1), "adv_mean": adv.mean(-1)}

    def replica(k: int) -> Actor:
        return load_replica(actors[k], actor, k)

    iql_once = GraphedStep(iql_step, graphed)
    logs = [start(a, method, args.total_steps) for a in runs]
    for step in range(1, args.total_steps + 1):
        out = iql_once(iql_batch())  # {name: [R]}; with --cuda-graph the graph's outputs, read before the next step
        actor_sched.step()
        if step <= args.loss_trace:
            trace["iql"].append(torch.stack([out[name] for name in IQL_LOSSES]).clone())
        if is_eval_step(args, step, args.total_steps):
            cols = {name: x.tolist() for name, x in out.items()}
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the reference run's does
                    ret = in_training_eval(replica(k), norm, spec, args.eval_episodes, args.eval_seed)
                logs[k].log(step, {**{name: col[k] for name, col in stage1.items()},
                                   **{name: col[k] for name, col in cols.items()}, "eval_return": ret})
        else:
            logs[0].tick(step, lambda: {name: out[name].mean().item() for name in IQL_LOSSES})
    reward_trace = torch.stack(trace["reward_loss"]).T.tolist() if trace["reward_loss"] else [[] for _ in runs]
    iql_trace = (torch.stack(trace["iql"]).permute(2, 1, 0).tolist() if trace["iql"]  # [R][3][T]
                 else [[[] for _ in IQL_LOSSES] for _ in runs])
    for k in range(R):
        finish(logs[k], runs[k], spec, artifact(replica(k).cpu(), norm, **run_facts(runs[k], data, method)))
    return {"method": method, "runs": [
        {"seed": a.seed, "log": logs[k].log_rows, "r_expert": stage1["r_expert"][k],
         "r_unlabelled": stage1["r_unlabelled"][k],
         "loss_trace": {"reward_loss": reward_trace[k], **dict(zip(IQL_LOSSES, iql_trace[k]))}}
        for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
