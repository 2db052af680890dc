"""The fast path of train_dwbc.py (DWBC; OILCA on an augmented dataset): several seeds side by side in one process,
minibatches drawn on the GPU, each step replayed as a CUDA graph. The method is train_dwbc.py's (its Args, rows,
minibatch draw, discriminator and losses are imported from it); this file only runs R replicas of it at once.

    python fast/train_dwbc.py --seeds 0 1 2 3 4 --dataset data/aug_s{seed}.npz --out-dir "runs/oilca_s{seed}" \
        --cuda --cuda-graph

Replica k is initialised as `train_dwbc.py --seed k` is (torch.manual_seed(k), then its actor and discriminator),
draws its minibatches from its own default_rng(k) with the same calls (on a GPU from its own device generator
instead, 1,000 steps at a time), has its own slice of the Adam moments and, with --adaptive-eta, its own η (an [R]
tensor), so on a CPU it follows the reference run up to float rounding (tests/test_fast_dwbc.py). It writes that
run's files to `--out-dir` and `--final-eval` with `{seed}` replaced by k; `{seed}` in `--dataset` gives each replica
its own dataset (OILCA's per-seed augmentations), all of one benchmark.

With --cuda --cuda-graph the whole training step (forward pass, discriminator step, policy step) is one CUDA graph,
two in fact: the step with and the step without the discriminator update (GraphedStep keys True/False, for
--d-update-every > 1). What stays eager: the minibatch draw (IndexChunks, 1,000 steps of indices at a time), the
logging, evaluations and checkpoints between steps, and --adaptive-eta, refused with --cuda-graph since its η is a
new tensor each discriminator step, which a captured step would not see.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import train_dwbc as ref  # noqa: E402
from fast.replicas import (FastArgs, GraphedStep, IndexChunks, load_replica, minibatch_generator,  # noqa: E402
                           per_replica, replica_args, samples_on_device, stack_replicas)
from oilca import contract  # noqa: E402
from training.trainer import (Actor, Normalizer, artifact, check_args, check_checkpoints, checkpoint_name,  # noqa: E402
                           final_eval_paths, finish, in_training_eval, is_eval_step, load, run_cli, run_facts, setup,
                           start)


@dataclass
class Args(ref.Args, FastArgs):
    pass


def load_set(a: ref.Args) -> dict:
    """One dataset as the reference run `a` reads it: data, metadata, env, row sets and normaliser."""
    data, meta, spec = load(a.dataset)
    rows = ref.dwbc_rows(data, a)
    return {"data": data, "meta": meta, "spec": spec, "rows": rows,
            "norm": Normalizer(data["observations"][rows["train"]], meta["action_low"], meta["action_high"])}


@contract.all_or_nothing
def main(args: Args) -> dict:
    check_args(args, **ref.RULES)
    checkpoints = check_checkpoints(args.checkpoints, args.total_steps)
    runs = replica_args(args, ref.Args)  # one reference Args per seed, as `train_dwbc.py --seed k` has them
    if args.cuda_graph and args.adaptive_eta:
        raise ValueError("--cuda-graph: not with --adaptive-eta (its η changes inside the step)")
    sets = {}
    for a in runs:  # one dataset, or one per seed (`{seed}` in --dataset)
        if a.dataset not in sets:
            sets[a.dataset] = load_set(a)
    paths = list(sets)
    meta, spec = sets[paths[0]]["meta"], sets[paths[0]]["spec"]
    for path in paths[1:]:
        if (sets[path]["meta"]["obs_dim"], sets[path]["meta"]["act_dim"], sets[path]["spec"]["env_id"]) != \
                (meta["obs_dim"], meta["act_dim"], spec["env_id"]):
            raise ValueError(f"--dataset {path}: another env or shape than {paths[0]} (one --dataset per seed must "
                             f"be the same benchmark)")
    contract.check_paths({"--dataset": paths}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    method = args.method or ("oilca" if any(len(d["rows"]["augmented"]) for d in sets.values()) else "dwbc")
    if args.alpha < 1 + args.eta / (ref.D_MIN * (1 - ref.D_MIN)):
        print(f"warning: alpha={args.alpha} < 1 + eta/0.09 = {1 + args.eta / 0.09:.2f}: expert weights can be negative")
    device = setup(args)
    graphed = args.cuda_graph and device.type == "cuda"
    for path, d in sets.items():
        d["obs"] = torch.as_tensor(d["norm"].obs(d["data"]["observations"]), device=device)
        d["act"] = torch.as_tensor(d["norm"].act(d["data"]["actions"]), device=device)
        d["pools"] = {name: torch.as_tensor(d["rows"][name], device=device)
                      for name in ("expert", "collected", "augmented", "unlabelled")}
        print(f"{method}: D_E {len(d['rows']['collected'])} collected + {len(d['rows']['augmented'])} augmented rows, "
              f"D_U {len(d['rows']['unlabelled'])} rows ({path})")
    R, B = len(runs), args.batch_size
    print(f"{method}: seeds {[a.seed for a in runs]} side by side"
          + (", one dataset per seed" if len(paths) > 1 else "") + (", each step a CUDA graph" if graphed else ""))

    actors, discs = [], []
    for a in runs:  # replica k built as `train_dwbc.py --seed k` builds its actor and discriminator
        torch.manual_seed(a.seed)
        actors.append(Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps))
        discs.append(ref.Discriminator(meta["obs_dim"], meta["act_dim"]))
    actor, disc = stack_replicas(actors).to(device), stack_replicas(discs).to(device)
    capturable = {"capturable": True} if graphed else {}
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.actor_weight_decay,
                                 **capturable)
    disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr, **capturable)
    data_of = [sets[a.dataset] for a in runs]
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    state = {"eta": torch.full((R,), 0.3, device=device) if args.adaptive_eta else args.eta}  # [R] or a float

    if len(paths) == 1:  # every replica reads the same rows: [R, 2B] indices -> [R, 2B, dim]
        obs, act = data_of[0]["obs"], data_of[0]["act"]

        def batch(idx):
            return obs[idx], act[idx]
    else:  # replica k's rows from its own dataset: [R, N_max, dim], gathered per replica
        n_max = max(len(d["obs"]) for d in data_of)

        def pad(x):
            return torch.cat([x, x.new_zeros((n_max - len(x),) + x.shape[1:])])

        obs, act = torch.stack([pad(d["obs"]) for d in data_of]), torch.stack([pad(d["act"]) for d in data_of])
        ridx = torch.arange(R, device=device)[:, None]

        def batch(idx):
            return obs[ridx, idx], act[ridx, idx]

    def device_draw(k: int, n: int) -> torch.Tensor:
        """Replica k's row indices [expert batch; unlabelled batch] of n steps, [n, 2B], from its device generator:
        the reference's draw (ref.draw_batch) with each expert row augmented with probability aug_frac."""
        pools, shape = data_of[k]["pools"], (n, B)

        def pick(pool):
            return pools[pool][torch.randint(len(pools[pool]), shape, generator=gens[k], device=device)]

        if args.aug_frac is None:
            expert = pick("expert")
        else:  # Binomial(B, aug_frac) augmented rows, as on the CPU
            is_aug = torch.rand(shape, generator=gens[k], device=device) < args.aug_frac
            expert = torch.where(is_aug, pick("augmented"), pick("collected"))
        return torch.cat([expert, pick("unlabelled")], -1)

    chunks = IndexChunks(lambda n: torch.stack([device_draw(k, n) for k in range(R)], 1)) \
        if samples_on_device(device) else None

    def step_fn(idx: torch.Tensor, update_disc: bool):
        """One DWBC step of every replica on its minibatch rows idx [R, 2B]: one forward pass over [expert batch;
        unlabelled batch], the discriminator's step when due (Eq. 5), then the policy's (Eq. 6)."""
        o, a_ = batch(idx)
        log_pi = actor.log_prob(o, a_)  # [R, 2B, act_dim]
        d = disc(o, a_, ref.normalize_log_pi(log_pi))  # [R, 2B]
        log_pi_e, log_pi_u, d_e, d_u = log_pi[:, :B], log_pi[:, B:], d[:, :B], d[:, B:]
        d_loss = None
        if update_disc:
            d_loss = per_replica(ref.discriminator_loss, d_e, d_u, state["eta"], args.pu)  # [R]
            disc_opt.zero_grad()
            d_loss.sum().backward()  # replica k's slice of the gradient is ∂d_loss_k alone
            disc_opt.step()
            if args.adaptive_eta:  # [R], on the device (no host round trip)
                state["eta"] = per_replica(ref.expert_share, d_e).clamp(0.2, 0.8)
        p_loss = per_replica(ref.policy_loss, log_pi_e, log_pi_u, d_e, d_u, args.alpha, state["eta"])  # [R]
        actor_opt.zero_grad()
        p_loss.sum().backward()
        actor_opt.step()
        return p_loss, d_loss, d_e, d_u

    def replica(k: int) -> Actor:
        return load_replica(actors[k], actor, k)

    def policy_artifact(k: int, **extra) -> dict:
        d = data_of[k]
        facts = run_facts(runs[k], d["data"], method, augmented_de_over_du=ref.de_over_du(d["rows"]), **extra)
        return artifact(replica(k).cpu(), d["norm"], **facts)

    step_once = GraphedStep(step_fn, graphed)
    logs = [start(a, method, args.total_steps) for a in runs]
    trace = {"policy_loss": [], "d_loss": []}
    for step in range(1, args.total_steps + 1):
        if chunks is not None:
            idx = chunks.next()
        else:
            idx = torch.stack([torch.as_tensor(ref.draw_batch(d["rows"], r, B, args.aug_frac), device=device)
                               for d, r in zip(data_of, rngs)])
        p_loss, d_loss, d_e, d_u = step_once(idx, step % args.d_update_every == 0)
        if step <= args.loss_trace:
            trace["policy_loss"].append(p_loss.detach().clone())
            if d_loss is not None:
                trace["d_loss"].append(d_loss.detach().clone())
        if step in checkpoints:
            for k in range(R):
                contract.save_policy(logs[k].staged(checkpoint_name(step)), policy_artifact(k, checkpoint_step=step))
        if is_eval_step(args, step, args.total_steps):
            eta = state["eta"]
            cols = {"policy_loss": p_loss.tolist(),
                    "d_loss": per_replica(ref.discriminator_loss, d_e, d_u, eta, args.pu).tolist(),
                    "d_expert": d_e.mean(-1).tolist(), "d_unlabelled": d_u.mean(-1).tolist(),
                    "eta": eta.tolist() if torch.is_tensor(eta) else [float(eta)] * R}
            for k in range(R):
                ret = in_training_eval(replica(k), data_of[k]["norm"], spec, args.eval_episodes, args.eval_seed)
                logs[k].log(step, {**{name: col[k] for name, col in cols.items()}, "eval_return": ret})
        else:
            logs[0].tick(step, lambda: {"policy_loss": p_loss.mean().item()})
    traces = {name: torch.stack(v).T.tolist() if v else [[] for _ in runs] for name, v in trace.items()}
    for k in range(R):
        finish(logs[k], runs[k], spec, policy_artifact(k))
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k].log_rows,
                                        "loss_trace": {name: t[k] for name, t in traces.items()}}
                                       for k, a in enumerate(runs)]}


if __name__ == "__main__":
    run_cli(main, Args)
