"""The fast path of train_ilid.py: several seeds side by side in one process, minibatches drawn on the GPU, each
training step replayed as a CUDA graph. The method is train_ilid.py's (its Args, rows, networks, losses, selection
with rollback and row weights are imported from it); this file only runs R replicas of it at once.

    python fast/train_ilid.py --seeds 0 1 2 3 4 --out-dir "runs/ilid_s{seed}" --cuda --cuda-graph

The discriminator D, the reference policy π_E and the policy π are each the R replicas' networks stacked into one
(stack_replicas), log α is one value per replica, and every loss is the reference's applied to each replica's slice
(per_replica), one value per replica [R]. Each replica selects its own rows with its own D (stage 2). Replica k is
`train_ilid.py --seed k`: its networks are built on its own stream of torch's global generator (TorchStreams: started
as torch.manual_seed(k) starts it, in the reference's order D, π, π_E), and its in-training evaluations build their
layers on that stream too; on the CPU it draws its minibatches from its own default_rng(k) with the reference's calls
(stage 1, 3, then 4), and it has its own slice of the Adam moments, so it follows the reference run up to float
rounding (tests/test_fast_ilid.py). It writes that run's files to `--out-dir` and `--final-eval` with `{seed}`
replaced by k.

On a GPU (--cuda) the data stays on the device and each replica's own device generator (seeded by k; not the
reference's draws) draws the rows of 1,000 steps at a time (stage 1: B rows of D_E and B of D_S; stage 3: B rows of
D_E; stage 4: B rows of the replica's selected D_S ∪ D_E and B of D_E). With --cuda-graph (optimisers
capturable=True) the training step of each of the three training stages is a CUDA graph (GraphedStep, one per stage:
their index buffers differ in shape): stage 1 D's two forward passes, the PU loss and its Adam step; stage 3 π_E's BC
step; stage 4 π's weighted BC step and α's Lagrangian step (static shapes, no host-side branching). Eager: stage 2,
the selection with rollback, which is host-side and data-dependent (D(s′) of every row is scored on the device, then
numpy walks the episodes and each replica's pool of selected rows, of its own size, is built on the host); the one
pass that computes ℓ_E; the draws of each 1,000-step chunk; and the in-training evaluations and logging (host-side,
at --eval-every steps).
"""

import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_ilid as ref  # noqa: E402
from fast.replicas import (build_replicas, FastArgs, GraphedStep, IndexChunks, load_replica, minibatch_generator,  # noqa: E402
                           per_replica, samples_on_device, seed_runs, TorchStreams)
from oilca import checks, contract  # noqa: E402
from training.trainer import (transition_tensors, Actor, artifact, finish, in_training_eval, is_eval_step, nll, Normalizer,  # noqa: E402
                              Progress, run_cli, run_facts, setup, start)

LOSSES = ("d_loss", "bc_loss", "policy_loss", "alpha_loss")


@dataclass
class Args(ref.Args, FastArgs):
    pass


@contract.all_or_nothing
@ref.flush_denormals
def main(args: Args) -> dict:
    runs, data, meta, spec = seed_runs(args, ref, ref.RULES, expert=True)  # one reference Args per seed
    d_steps, bc_steps = ref.stage_steps(runs[0])
    exp_rows, sup_rows, aug = ref.ilid_rows(data, runs[0].dataset)
    method = args.method or ("ilid_ca" if aug.any() else "ilid")
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])
    obs, next_obs, act = transition_tensors(data, norm, device)
    obs_dim, act_dim, N, B, R = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size, len(runs)
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), D_S {len(sup_rows)} rows ({args.dataset}), "
          f"seeds {[a.seed for a in runs]} side by side" + (", each step a CUDA graph" if graphed else ""))

    streams = TorchStreams([a.seed for a in runs])  # replica k's torch generator, as torch.manual_seed(k) starts it

    def replicas(make):  # replica k's networks made on its own stream, in the reference's order
        return build_replicas(make, streams, device)

    # A step's rows [R, n·B]: B rows of each of replica k's pools in turn (pools[k], a list of row-number arrays)
    on_device = samples_on_device(device)
    gens = [minibatch_generator(a.seed, device) for a in runs] if on_device else None
    rngs = [np.random.default_rng(a.seed) for a in runs]

    def sampler(pools):
        if on_device:  # each replica's device generator, 1,000 steps at a time
            dev = [[torch.as_tensor(p, device=device) for p in ps] for ps in pools]
            chunks = IndexChunks(lambda n: torch.stack([torch.cat(
                [p[torch.randint(len(p), (n, B), generator=g, device=device)] for p in ps], -1)
                for g, ps in zip(gens, dev)], 1))
            return chunks.next
        # the reference's calls on numpy's default_rng(k)
        return lambda: torch.stack([torch.as_tensor(np.concatenate([r.choice(p, B) for p in ps]))
                                    for r, ps in zip(rngs, pools)]).to(device)

    def all_replicas(x):
        return x.expand(R, *x.shape)

    cap = {"capturable": True} if graphed else {}
    trace = {name: [] for name in LOSSES}
    t0 = time.time()

    # stage 1: the state discriminator, PU loss
    disc, _ = replicas(lambda: ref.Discriminator(obs_dim, args.hidden, args.n_hidden))
    d_opt = torch.optim.Adam(disc.parameters(), lr=args.d_lr, weight_decay=args.d_weight_decay, **cap)

    def d_step(idx, _key=None):
        ie, i_s = idx.split(B, -1)  # [R, B] each
        loss = per_replica(ref.pu_loss, disc(obs[ie]), disc(obs[i_s]), args.eta, args.pu)  # [R]
        d_opt.zero_grad()
        loss.sum().backward()  # replica k's slice of the gradient is ∂loss_k alone
        d_opt.step()
        return loss.detach()

    d_once, d_batch = GraphedStep(d_step, graphed), sampler([[exp_rows, sup_rows]] * R)
    prog = Progress(f"{method} discriminator x{R}", d_steps)  # lines only
    for step in range(1, d_steps + 1):
        d_loss = d_once(d_batch())
        if step <= args.loss_trace:
            trace["d_loss"].append(d_loss.clone())
        prog.update(step, lambda: {"loss": d_loss.mean().item()})
    d_loss = d_loss.clone()  # the last step's losses (the graph's output buffer, kept for the logs)

    # stage 2 (eager, host-side): selection with rollback, from each replica's D(s′) of every row: [R, N]
    d_next = ref.chunked(lambda i: disc(all_replicas(next_obs[i])), np.arange(N), device)
    d_state = ref.chunked(lambda i: disc(all_replicas(obs[i])), np.arange(N), device).cpu().numpy()
    ends = data["terminals"] | data["timeouts"]
    w_all = ref.rollback_weights((d_next >= args.bar).cpu().numpy(), data["episode_ids"], ends, args.rollback,
                                 args.decay, args.weight_init)
    row_w = ref.row_weights(w_all, exp_rows, sup_rows)  # [R, N]
    pools = [np.flatnonzero(row_w[k] > 0) for k in range(R)]  # each replica's selected D_S ∪ D_E
    row_w_dev = torch.as_tensor(row_w, device=device)
    selected = [int((row_w[k, sup_rows] > 0).sum()) for k in range(R)]
    d_e, d_s = d_state[:, exp_rows].mean(-1), d_state[:, sup_rows].mean(-1)
    stage1 = {"d_loss": d_loss.tolist(), "d_expert": d_e.tolist(), "d_supplementary": d_s.tolist(),
              "selected": [float(s) for s in selected]}
    for k, a in enumerate(runs):
        checks.finite_losses({name: col[k] for name, col in stage1.items()}, d_steps,
                             f"{method} discriminator (seed {a.seed})")
    print(f"[{method}] discriminator x{R}: {d_steps} steps, loss {d_loss.mean().item():.3f}, mean D on D_E "
          f"{d_e.mean():.2f}, on D_S {d_s.mean():.2f}; selected {np.mean(selected):.0f} of {len(sup_rows)} D_S rows  "
          f"({time.time() - t0:.0f} s)", flush=True)

    # stage 3: the reference policy π_E, BC on D_E; the policy starts as its copy
    make_actor = lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps)  # noqa: E731
    actor, actors = replicas(make_actor)
    zero = torch.zeros(R, device=device)
    ref_log_lik = bc_l = zero  # no π_E with --no-auto-alpha
    if args.auto_alpha:
        ref_actor, _ = replicas(make_actor)
        ref_opt = torch.optim.Adam(ref_actor.parameters(), lr=args.actor_lr, weight_decay=args.weight_decay, **cap)

        def bc_step(idx, _key=None):
            loss = per_replica(nll, ref_actor.log_prob(obs[idx], act[idx]))  # the reference's bc_loss, [R]
            ref_opt.zero_grad()
            loss.sum().backward()
            ref_opt.step()
            return loss.detach()

        bc_once, bc_batch = GraphedStep(bc_step, graphed), sampler([[exp_rows]] * R)
        prog = Progress(f"{method} reference BC x{R}", bc_steps)  # lines only
        for step in range(1, bc_steps + 1):
            bc_l = bc_once(bc_batch())
            if step <= args.loss_trace:
                trace["bc_loss"].append(bc_l.clone())
            prog.update(step, lambda: {"loss": bc_l.mean().item()})
        bc_l = bc_l.clone()
        # ℓ_E = E_{D_E}[Σ_j log π_E(a_j | s)] of each replica, once (eager): [R]
        ref_log_lik = ref.chunked(lambda i: ref_actor.log_prob(all_replicas(obs[i]), all_replicas(act[i])).sum(-1),
                                  exp_rows, device).mean(-1)
        if args.bc_init:
            actor.load_state_dict(ref_actor.state_dict())
        for k, a in enumerate(runs):
            checks.finite_losses({"bc_loss": bc_l[k].item(), "ref_log_lik": ref_log_lik[k].item()}, bc_steps,
                                 f"{method} reference BC (seed {a.seed})")
        print(f"[{method}] reference BC x{R}: {bc_steps} steps, loss {bc_l.mean().item():.3f}, mean log π_E on D_E "
              f"{ref_log_lik.mean().item():.3f}  ({time.time() - t0:.0f} s)", flush=True)

    # stage 4: the policy, weighted BC on selected D_S ∪ D_E plus α × BC on D_E
    log_alpha = nn.Parameter(torch.full((R,), math.log(args.alpha), device=device))
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.weight_decay, **cap)
    alpha_opt = torch.optim.Adam([log_alpha], lr=args.alpha_lr, **cap)

    def policy_step(idx, _key=None):
        ib, ie = idx.split(B, -1)  # [R, B] each: selected D_S ∪ D_E, D_E
        log_pi_b, log_pi_e = actor.log_prob(obs[idx], act[idx]).sum(-1).split(B, -1)
        alpha = log_alpha.exp()
        p_loss = per_replica(ref.policy_loss, log_pi_b, row_w_dev.gather(1, ib), log_pi_e, alpha)  # [R]
        a_loss = per_replica(ref.alpha_loss, log_alpha, log_pi_e, ref_log_lik, args.epsilon) if args.auto_alpha \
            else zero
        actor_opt.zero_grad()
        alpha_opt.zero_grad()
        (p_loss + a_loss).sum().backward()  # disjoint parameters; replica k's slices get ∂(its losses) alone
        actor_opt.step()
        if args.auto_alpha:
            alpha_opt.step()
        return {"policy_loss": p_loss.detach(), "alpha_loss": a_loss.detach(), "alpha": alpha.detach(),
                "log_lik_gap": (ref_log_lik - log_pi_e.mean(-1)).detach()}

    def replica(k: int) -> Actor:
        return load_replica(actors[k], actor, k)

    policy_once, policy_batch = GraphedStep(policy_step, graphed), sampler([[p, exp_rows] for p in pools])
    logs = [start(a, method, args.total_steps) for a in runs]
    for step in range(1, args.total_steps + 1):
        out = policy_once(policy_batch())  # {name: [R]}; --cuda-graph: the graph's outputs, read before the next step
        if step <= args.loss_trace:
            trace["policy_loss"].append(out["policy_loss"].clone())
            trace["alpha_loss"].append(out["alpha_loss"].clone())
        if is_eval_step(args, step, args.total_steps):
            cols = {**stage1, "bc_loss": bc_l.tolist(), "ref_log_lik": ref_log_lik.tolist(),
                    **{name: out[name].tolist() for name in ("policy_loss", "alpha", "log_lik_gap")}}
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the reference run's does
                    ret = in_training_eval(replica(k), norm, spec, args.eval_episodes, args.eval_seed)
                logs[k].log(step, {**{name: col[k] for name, col in cols.items()}, "eval_return": ret})
        else:
            logs[0].tick(step, lambda: {"policy_loss": out["policy_loss"].mean().item(),
                                        "alpha": out["alpha"].mean().item()})
    traces = {name: torch.stack(xs).T.tolist() if xs else [[] for _ in runs] for name, xs in trace.items()}
    for k in range(R):
        finish(logs[k], runs[k], spec, artifact(replica(k).cpu(), norm, **run_facts(runs[k], data, method)))
    return {"method": method, "runs": [
        {"seed": a.seed, "log": logs[k].log_rows, "row_weights": row_w[k], "selected": selected[k],
         "loss_trace": {name: traces[name][k] for name in LOSSES}} for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
