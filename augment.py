"""Counterfactual data augmentation of OILCA (Algorithm 1, lines 5–9; §4.2).

1. Pretrain the sampler policy π̂_E by behavior cloning on D_E (policy.py's tanh-Gaussian actor and loss, as BC-exp),
   or take a BC-exp policy artifact already trained on this dataset (`--sampler runs/bc_exp/policy.pt`).
2. For each new row: draw an expert transition (s, a, s', c) from D_E and infer its exogenous variable
   u ~ q(u | s, a, s', c) with the iVAE (ivae.py, fit by train_ivae.py; `--posterior mean` uses the posterior mean);
   draw a different (s~, a~) from D_U; generate the counterfactual state s~' = f(s~, a~, u) (decoder mean);
   label it a~' = π̂_E(s~') (the deterministic mean action; `--label sample` samples instead).
   The row also gets s~'' = f(s~', a~', u), the counterfactual next state under the same u.
3. Write D_all plus the new rows, marked `augmented`, as a dataset of the same contract.

`--mode reconstruct` reproduces the authors' code instead (their algos/augment_DWBC_expert.py): u ~ q(u | expert
row), s~' ~ N(f(s, a, u), σ²_dec), a noisy re-sample of the expert's own next state, labelled with a sample
of π̂_E. No D_U state is used. It exists to measure the difference.

Controls (each isolates one part of the method; the same number of rows as the counterfactual mode):
- `--labels oracle`: label a~' with the env's own expert (envs.reference_policy "expert": the toy controller, the
  most trained DeepMind Control snapshot, the CausalWorld expert the data came from) instead of π̂_E. It isolates
  the counterfactual state from the sampler's error; an upper bound no user has offline.
- `--mode copy`: no counterfactual. The row's state is the D_U partner's own next state s', drawn exactly as the
  counterfactual mode draws its partners (same seed, same partners), labelled by the same sampler; s~'' is the
  partner episode's next state after s' (s' itself at an episode end). No iVAE is used. If this matches OILCA,
  the iVAE adds nothing in that setting.
- `--mode expert_data`: "true expert data" (the paper's Table 8 column): instead of generated rows, real rows of
  the env's expert, collected online (envs.expert_episodes) in whole episodes whose classes of c are drawn from
  D_E's rows, then subsampled to the row count. Rewards, next states and (where known) u are the real ones.

Label sources beyond the paper (docs/labels.md; each changes only who labels s~', recorded in the metadata):
- `--labels ensemble`: K = `--ensemble-size` BC-exp samplers, member k trained as the sampler above on a bootstrap
  resample of D_E's episodes (drawn with replacement, seeded by (--seed, k)), or K given policy artifacts
  (`--ensemble-members`). The label is the members' mean action; their disagreement on a row is the mean over action
  dims of the members' standard deviation, actions scaled to [-1, 1] by the bounds. `--ensemble-keep q` draws
  ceil(n/q) candidate rows exactly as the counterfactual mode draws n, and keeps the n whose labels disagree least
  (q = 1: the same rows as the plain mode with the same seed, only the labels differ). Choose q on held-out D_E
  episodes (select_sampler.py --out-result), never by rollouts.
- Self-improving labels: `--sampler` may be a policy trained on an augmentation of this dataset (e.g. OILCA's own
  policy): with the same --seed and --ivae the counterfactual states are the same as the previous round's, only the
  labels change; the sampler facts then record `round` (the labeller's own round + 1).
- Any other imitation policy trained on this dataset (ISW-BC, ILID, …) labels through `--sampler` as BC-exp does.
- `--support-keep q` (with the sampler's or the oracle's labels): draw ceil(n/q) candidate rows exactly as the
  counterfactual mode draws n, and keep the n whose counterfactual state s~' lies nearest a D_E state (Euclidean
  distance, each state dim divided by its std over D_all; at most `--support-reference` D_E rows, drawn with
  --seed, are the reference). It keeps the rows where the labeller is inside the states it was trained on: on the
  toy, BC-exp's label error grows with that distance. Choose q on held-out D_E episodes, never by rollouts.

Amount: `ratio` = |augmented D_E| / |D_U|, the x-axis of the paper's Fig. 5; augmented D_E = the collected
expert rows plus the new rows, so the script makes max(0, round(ratio·|D_U|) - |D_E|) rows.

Inputs:  --dataset (docs/contract.md) and --ivae (train_ivae.py's ivae.pt, which must have been fit on this dataset).
Outputs: --out, the augmented dataset: new rows have augmented=True, expert=True, episode_ids=-1, aux = the
         source expert row's c, exogenous = the source row's true u (where known), reward 0, no end flag,
         aug_source = index of the expert row, aug_partner = index of the D_U row (-1 in reconstruct mode);
         metadata["augmentation"] records the arguments and counts.
         --sampler-out, the sampler π̂_E as a policy artifact (evaluate.py can roll it out).
Every flag is checked before any work; the sampler and the dataset are written at the end, after the augmented
dataset has passed the contract's checks, and no output may be one of the inputs.
"""

import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Literal, Optional, Tuple

import numpy as np
import torch

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from oilca.ivae import load_ivae
from training.policy import ACT_EPS, Actor, Normalizer, artifact, bc_loss, check_dims


MAX_RATIO = 100.0  # --ratio above this would multiply D_U a hundredfold: refused as a typo


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset D_all"""
    ivae: str = "runs/ivae/ivae.pt"
    """iVAE checkpoint fit on this dataset (train_ivae.py)"""
    out: str = "data/toy_aug.npz"
    """output: the augmented dataset"""
    sampler: Optional[str] = None
    """use this policy artifact (e.g. train_bc.py's BC-exp on the same dataset) as π̂_E instead of training one"""
    sampler_out: str = "runs/sampler/policy.pt"
    """output: the trained sampler policy π̂_E as a policy artifact (when --sampler is not given); with --labels
    ensemble, member k's artifact goes to this path with `_m<k>` before `.pt`"""
    labels: Literal["sampler", "oracle", "ensemble"] = "sampler"
    """who labels the new rows: the sampler π̂_E (the method), the env's own expert (the oracle-labels control), or
    the mean of an ensemble of samplers (--ensemble-size, --ensemble-keep)"""
    ensemble_size: int = 5
    """--labels ensemble: members K, each BC on a bootstrap resample of D_E's episodes (when --ensemble-members is not given)"""
    ensemble_keep: float = 1.0
    """--labels ensemble: share q in (0, 1] of ceil(n/q) drawn candidate rows kept, those whose labels disagree least"""
    ensemble_members: Tuple[str, ...] = ()
    """--labels ensemble: these policy artifacts (trained on this dataset) are the members instead of training them"""
    support_keep: float = 1.0
    """share q in (0, 1] of ceil(n/q) drawn candidate rows kept, those whose s~' is nearest a D_E state (1: all)"""
    support_reference: int = 20_000
    """--support-keep: at most this many D_E rows (drawn with --seed) are the states the distance is measured to"""
    ratio: float = 0.5
    """|augmented D_E| / |D_U| (Fig. 5's x-axis), in [0, 100]"""
    mode: Literal["counterfactual", "reconstruct", "copy", "expert_data"] = "counterfactual"
    """counterfactual: expert u with (s~, a~) from D_U (the paper); reconstruct: the authors' code path; copy: the
    partner's own s' (no iVAE); expert_data: real expert rows collected online (the controls above)"""
    posterior: Literal["sample", "mean"] = "sample"
    """u drawn from q(u | s, a, s', c), or its mean"""
    label: Literal["mean", "sample"] = "mean"
    """label a~' with π̂_E's mean action, or with a sample (reconstruct mode always samples, as the authors' code)"""
    seed: int = 0
    """seed of the sampler training and of the draws"""
    sampler_steps: int = 5_000
    """BC steps of the sampler π̂_E on D_E"""
    sampler_lr: float = 1e-4
    """Adam learning rate of the sampler (weight decay 5e-3, as BC-exp)"""
    batch_size: int = 256
    """BC minibatch size"""
    hidden: int = 256
    """hidden width of the sampler"""
    act_eps: float = ACT_EPS
    """the sampler's (and ensemble members') likelihood clips actions to ±(1 - act_eps), as the trainers' --act-eps
    (CausalWorld's rows train with 1e-2, and the runner passes it here too; 1e-6 makes its ±1 expert actions
    targets of ±7.25, and the policies it trains fail)"""
    threads: int = 1
    """torch CPU threads"""


def sampler_facts(args: Args, art: Optional[dict], uses_sampler: bool, members: Optional[list] = None) -> Optional[dict]:
    """Who labelled the new rows, as run facts for every later result: the sampler's kind (its method label, or
    `oracle`), its training steps and seed; None where no row is labelled by a policy (--mode copy/expert_data).
    An ensemble adds `size` and `keep` (its kind is `ensemble_<member kind>`); a sampler that was itself trained on
    augmented rows (a self-improving round) adds `round`, its own labeller's round + 1 (a plain labeller is round 1);
    --support-keep q < 1 adds `support_keep`."""
    if members is not None:
        kinds = {m["kind"] for m in members}
        steps = {m["steps"] for m in members}
        return {"kind": "ensemble_" + "+".join(sorted(kinds)), "steps": steps.pop() if len(steps) == 1 else None,
                "seed": int(args.seed), "size": len(members), "keep": float(args.ensemble_keep)}
    if not uses_sampler:
        facts = {"kind": "oracle", "steps": None, "seed": None} if args.labels == "oracle" else None
    else:
        facts = policy_facts(art)
        if not args.sampler:
            facts["steps"] = args.sampler_steps
    if facts is not None and args.support_keep < 1.0:  # which of the labelled rows were kept
        facts["support_keep"] = float(args.support_keep)
    return facts


def policy_facts(art: dict) -> dict:
    """A labelling policy's kind (method), training steps and seed, and its round where it was trained on
    augmented rows."""
    steps = art.get("checkpoint_step", art.get("policy_step", (art.get("train_args") or {}).get("total_steps")))
    facts = {"kind": art["method"], "steps": None if steps is None else int(steps), "seed": int(art["seed"])}
    prev = art.get("augmentation") if isinstance(art.get("augmentation"), dict) else {}
    if isinstance(prev.get("sampler"), dict):  # trained on rows another labeller labelled: the next round
        facts["round"] = int(prev["sampler"].get("round", 1)) + 1
    return facts


def recorded(args: Args) -> dict:
    """The arguments as written into the dataset and the sampler artifacts. The support filter's flags appear only
    where it is on, so a dataset made without it is byte-identical to one made before the flag existed (a runner
    study's finished jobs stay up to date); so does --act-eps at its default."""
    rec = asdict(args)
    if args.support_keep == 1.0:
        del rec["support_keep"], rec["support_reference"]
    if args.act_eps == ACT_EPS:  # likewise for the sampler's action clip at its default
        del rec["act_eps"]
    return rec


def support_distance(states: np.ndarray, reference: np.ndarray, scale: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """Each state's Euclidean distance to its nearest reference state, every dim divided by `scale` [N]."""
    ref = torch.as_tensor(reference / scale, dtype=torch.float32)
    out = np.empty(len(states), np.float32)
    for i in range(0, len(states), chunk):
        x = torch.as_tensor(states[i:i + chunk] / scale, dtype=torch.float32)
        out[i:i + chunk] = torch.cdist(x, ref).min(1).values.numpy()
    return out


def state_scale(obs: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
    """Each state dim's std over the rows (at least 1e-6), summed in chunks: no copy of a large dataset [obs_dim]."""
    s1, s2 = np.zeros(obs.shape[1]), np.zeros(obs.shape[1])
    for i in range(0, len(obs), chunk):
        x = obs[i:i + chunk].astype(np.float64)
        s1, s2 = s1 + x.sum(0), s2 + (x * x).sum(0)
    return np.maximum(np.sqrt(np.maximum(s2 / len(obs) - (s1 / len(obs)) ** 2, 0.0)), 1e-6)


def quantiles(x: np.ndarray) -> Optional[dict]:
    return {"median": float(np.median(x)), "p90": float(np.percentile(x, 90)), "max": float(x.max())} if len(x) else None


def member_path(sampler_out: str, k: int) -> str:
    """Where ensemble member k is written: --sampler-out with `_m<k>` before its extension."""
    stem, dot, ext = sampler_out.rpartition(".")
    return f"{stem}_m{k}.{ext}" if dot and "/" not in ext else f"{sampler_out}_m{k}"


def bootstrap_episodes(data: dict, exp_rows: np.ndarray, rng: np.random.Generator) -> Tuple[np.ndarray, list]:
    """A bootstrap resample of D_E: as many episodes as D_E has, drawn with replacement; (rows, episode ids drawn)."""
    eps = data["episode_ids"][exp_rows]
    ids = np.unique(eps)
    pick = rng.choice(ids, len(ids), replace=True)
    return np.concatenate([exp_rows[eps == e] for e in pick]), [int(e) for e in pick]


def ensemble_labels(policies: list, obs: np.ndarray, low: np.ndarray, high: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The members' mean action (each member's deterministic action, clipped to the bounds) and their disagreement:
    the mean over action dims of the members' standard deviation, actions scaled to [-1, 1]."""
    acts = np.stack([np.clip(np.asarray(p(obs), np.float64), low, high) for p in policies])  # [K, N, A]
    scaled = 2 * (acts - low) / (high - low) - 1
    return acts.mean(0).astype(np.float32), scaled.std(0).mean(-1)


def train_sampler(obs: np.ndarray, act: np.ndarray, meta: dict, args: Args, seed: Optional[int] = None,
                  name: str = "sampler π̂_E"):
    """π̂_E: BC on D_E with policy.py's actor and loss (seeded by --seed, or `seed`). Returns (actor, normalizer,
    final loss)."""
    seed = args.seed if seed is None else seed
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    norm = Normalizer(obs, meta["action_low"], meta["action_high"])
    obs_t, act_t = torch.as_tensor(norm.obs(obs)), torch.as_tensor(norm.act(act))
    actor = Actor(meta["obs_dim"], meta["act_dim"], args.hidden, act_eps=args.act_eps)
    opt = torch.optim.Adam(actor.parameters(), lr=args.sampler_lr, weight_decay=5e-3)
    for step in range(1, args.sampler_steps + 1):
        idx = torch.as_tensor(rng.integers(0, len(obs_t), args.batch_size))
        loss = bc_loss(actor, obs_t[idx], act_t[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 1000 == 0 or step == args.sampler_steps:
            print(f"[{name}] step {step}/{args.sampler_steps}  bc loss {loss.item():.3f}", flush=True)
    return actor, norm, float(loss.item())


@torch.no_grad()
def sample_actions(actor: Actor, norm: Normalizer, obs: np.ndarray, gen: torch.Generator) -> np.ndarray:
    """a~' ~ π̂_E(· | s~'): tanh of a Gaussian sample, mapped to the action bounds (the mean action is the
    policy artifact's, contract.build_policy)."""
    mu, log_std = actor(torch.as_tensor(norm.obs(obs)))
    a = torch.tanh(mu + log_std.exp() * torch.randn(mu.shape, generator=gen)).numpy()
    return (norm.low + (a + 1) / 2 * (norm.high - norm.low)).astype(np.float32)


BLOCK = 1 << 16  # counterfactual rows made this many at a time (the same rows, noise and labels as in one pass)


def buffer(spill: Optional[str], key: str, shape: tuple, dtype) -> np.ndarray:
    """An array for new rows: in memory, or (`spill`, a folder: the dataset is larger than memory) a file there."""
    if spill is None:
        return np.empty(shape, dtype)
    return np.lib.format.open_memmap(os.path.join(spill, key + ".npy"), "w+", dtype, shape)


def joined(old: np.ndarray, new: np.ndarray) -> contract.Rows:
    """np.concatenate([old, new]) in old's dtype, as contract.Rows: read block by block as the file is written."""
    old, new = np.asanyarray(old), np.asanyarray(new)

    def blocks():
        for part in (old, new):
            for i in range(0, len(part), BLOCK):
                yield np.asarray(part[i:i + BLOCK]).astype(old.dtype, copy=False)

    return contract.Rows((len(old) + len(new),) + old.shape[1:], old.dtype, blocks)


class Spill:
    """A folder beside --out for the new rows of a dataset larger than memory, made when first asked for and
    removed when the run ends, however it ends."""

    def __init__(self, near: str):
        self.near, self.path = near, None

    def folder(self) -> str:
        if self.path is None:
            self.path = tempfile.mkdtemp(prefix=".augment-spill-", dir=os.path.dirname(os.path.abspath(self.near)))
        return self.path

    def remove(self) -> None:
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> dict:
    spill = Spill(args.out)
    try:
        return augment(args, spill)
    finally:
        spill.remove()


def augment(args: Args, spill_folder: Spill) -> dict:
    t0 = time.time()
    checks.fields(args, ratio=checks.Real(0, MAX_RATIO), seed=checks.SEED, sampler_steps=checks.COUNT,
                  sampler_lr=checks.RATE, batch_size=checks.COUNT, hidden=checks.COUNT, threads=checks.COUNT,
                  ensemble_size=checks.Int(2, 100), ensemble_keep=checks.Real(0.01, 1.0),
                  support_keep=checks.Real(0.01, 1.0), support_reference=checks.COUNT, act_eps=checks.OPEN_UNIT)
    uses_ivae = args.mode in ("counterfactual", "reconstruct")
    uses_sampler = args.mode != "expert_data" and args.labels == "sampler"  # else nothing is trained or loaded
    ensemble = args.labels == "ensemble"
    if args.sampler and not uses_sampler:
        raise ValueError(f"--sampler: not used with --mode {args.mode} --labels {args.labels}; drop it"
                         + (" (the ensemble's members are --ensemble-members)" if ensemble else ""))
    if ensemble and args.mode != "counterfactual":
        raise ValueError(f"--labels ensemble: only with --mode counterfactual (not --mode {args.mode})")
    if ensemble and args.label == "sample":
        raise ValueError("--label sample: an ensemble labels with its members' mean action; use --label mean")
    if not ensemble and (args.ensemble_members or args.ensemble_keep != 1.0):
        raise ValueError("--ensemble-members/--ensemble-keep: only with --labels ensemble")
    support = args.support_keep < 1.0
    if support and (args.mode != "counterfactual" or ensemble):
        raise ValueError("--support-keep: only with --mode counterfactual and --labels sampler or oracle "
                         f"(not --mode {args.mode} --labels {args.labels})")
    if len(set(args.ensemble_members)) != len(args.ensemble_members) or len(args.ensemble_members) == 1:
        raise ValueError(f"--ensemble-members: at least two distinct policies, got {list(args.ensemble_members)}")
    train_members = ensemble and not args.ensemble_members
    member_outs = [member_path(args.sampler_out, k) for k in range(args.ensemble_size)] if train_members else []
    if args.labels == "oracle" and args.mode not in ("counterfactual", "copy"):
        raise ValueError(f"--labels oracle: only with --mode counterfactual or copy (--mode {args.mode} labels "
                         + ("nothing" if args.mode == "expert_data" else "with sampler samples") + ")")
    contract.check_paths({"--dataset": args.dataset, "--ivae": args.ivae if uses_ivae else None,
                          "--sampler": args.sampler, "--ensemble-members": list(args.ensemble_members)},
                         files={"--out": args.out,
                                "--sampler-out": (args.sampler_out if uses_sampler and not args.sampler else None)
                                or member_outs})
    data = envs.load_dataset(args.dataset)
    if "augmented" in data and data["augmented"].any():
        raise ValueError(f"{args.dataset} is already augmented: augment the raw dataset")
    contract.require_expert(data, args.dataset)
    meta = data["metadata"]
    spill = spill_folder.folder() if contract.is_mapped(data["observations"]) else None  # new rows go to disk
    ivae = load_ivae(args.ivae, data, args.dataset) if uses_ivae else None
    torch.set_num_threads(args.threads)
    exp_rows, unl_rows = np.flatnonzero(data["expert"]), np.flatnonzero(~data["expert"])
    if len(unl_rows) == 0 and args.mode in ("counterfactual", "copy"):
        raise ValueError(f"{args.dataset}: D_U is empty, nothing to pair the expert u with")
    n_aug = max(0, int(round(args.ratio * len(unl_rows))) - len(exp_rows))
    for path in [args.out, args.sampler_out if uses_sampler and not args.sampler else None] + member_outs:
        if path is not None:
            contract.claim(path)  # a second writer to the same output is refused while this run goes on

    # 1. the sampler π̂_E (Alg. 1 line 5), or the oracle that replaces it
    sample_labels = args.label == "sample" or args.mode == "reconstruct"
    spec = envs.env_spec(meta)
    sampler_loss, sampler_art = None, None
    if not uses_sampler:
        if args.label == "sample":
            raise ValueError(f"--label sample: nothing is sampled with --mode {args.mode} --labels {args.labels}")
        label_policy = envs.reference_policy(spec, "expert", args.seed) if args.labels == "oracle" else None
    elif args.sampler:
        if sample_labels:
            raise ValueError("a --sampler artifact holds only the mean action: use --label mean and --mode counterfactual")
        sampler_art = contract.load_policy(args.sampler)
        if sampler_art["dataset_fingerprint"] != contract.fingerprint(data):
            raise contract.ContractError(f"{args.sampler}: this sampler was trained on another dataset than {args.dataset}")
    else:
        actor, norm, sampler_loss = train_sampler(data["observations"][exp_rows], data["actions"][exp_rows], meta, args)
        sampler_art = artifact(actor, norm, method="sampler_bc_exp", seed=args.seed, env=envs.env_spec(meta),
                               dataset_fingerprint=contract.fingerprint(data), dataset=args.dataset, train_args=recorded(args))
    if uses_sampler:
        label_policy = contract.build_policy(sampler_art)  # the deterministic (mean) action, as saved
    low, high = np.asarray(meta["action_low"], np.float32), np.asarray(meta["action_high"], np.float32)
    label = lambda obs: np.clip(np.asarray(label_policy(obs), np.float32), low, high)  # noqa: E731
    members, member_arts, ens_facts, sup_facts = None, [], None, None
    if ensemble:  # K members: given artifacts, or BC-exp samplers on bootstrap resamples of D_E's episodes
        fp = contract.fingerprint(data)
        for k, path in enumerate(args.ensemble_members):
            art = contract.load_policy(path)
            if art["dataset_fingerprint"] != fp:
                raise contract.ContractError(f"{path}: this member was trained on another dataset than {args.dataset}")
            member_arts.append(art)
        members = [{"path": path, **policy_facts(art)} for path, art in zip(args.ensemble_members, member_arts)]
        for k in range(args.ensemble_size if train_members else 0):
            rows, eps = bootstrap_episodes(data, exp_rows, np.random.default_rng([args.seed, k]))
            seed_k = 1000 * args.seed + k
            actor_k, norm_k, loss_k = train_sampler(data["observations"][rows], data["actions"][rows], meta, args,
                                                    seed=seed_k, name=f"ensemble member {k}")
            member_arts.append(artifact(actor_k, norm_k, method="sampler_bc_exp", seed=seed_k, env=spec,
                                        dataset_fingerprint=fp, dataset=args.dataset, train_args=recorded(args),
                                        policy_step=args.sampler_steps, bootstrap_episodes=eps, ensemble_member=k))
            members.append({"path": member_outs[k], "kind": "sampler_bc_exp", "steps": args.sampler_steps,
                            "seed": seed_k, "bootstrap_episodes": eps, "bc_loss": loss_k})
        for path, art in zip(list(args.ensemble_members) or member_outs, member_arts):
            check_dims(path, art, spec)
        member_policies = [contract.build_policy(art) for art in member_arts]

    # 2. counterfactual rows (Alg. 1 lines 6–9)
    rng = np.random.default_rng(args.seed + 1)
    gen = torch.Generator().manual_seed(args.seed + 1)
    keep_share = args.ensemble_keep if ensemble else args.support_keep
    n_draw = math.ceil(n_aug / keep_share - 1e-9)  # candidates: the n most agreed, or nearest D_E, are kept
    src = rng.choice(exp_rows, n_draw)
    T = lambda k, rows: torch.as_tensor(data[k][rows])  # noqa: E731
    extra = {}
    if args.mode == "copy":  # the same partners as the counterfactual mode draws, their own s' (no iVAE)
        partner = rng.choice(unl_rows, n_aug)
        s_cf = data["next_observations"][partner]
        a_cf = label(s_cf)
        ends = data["terminals"][partner] | data["timeouts"][partner]  # s' ends the episode: no later state
        s_next_cf = np.where(ends[:, None], s_cf, data["next_observations"][np.minimum(partner + 1, len(data["rewards"]) - 1)])
    elif args.mode == "expert_data":  # real expert episodes under classes of c drawn from D_E's rows
        ep_len = int(meta["episode_len"])
        n_ep = -(-n_aug // ep_len)
        rows = envs.expert_episodes(spec, data["aux"][rng.choice(exp_rows, n_ep)], args.seed) if n_aug else None
        keep = np.sort(rng.choice(n_ep * ep_len, n_aug, replace=False)) if n_aug else np.zeros(0, int)
        partner, src = np.full(n_aug, -1), np.full(n_aug, -1)
        if n_aug:
            s_cf, a_cf, s_next_cf = (rows[k][keep] for k in ("observations", "actions", "next_observations"))
            extra = {k: rows[k][keep] for k in ("rewards", "aux", "episode_returns", "exogenous") if k in rows}
        else:  # nothing to add (the ratio is already met by D_E)
            s_cf, s_next_cf = (data["observations"][:0],) * 2
            a_cf = data["actions"][:0]
    elif args.mode == "counterfactual" and not (support or ensemble):  # the paper's rows, a block at a time
        partner = rng.choice(unl_rows, n_draw)
        s_cf, a_cf, s_next_cf = (buffer(spill, k, (n_aug,) + data[k].shape[1:], data[k].dtype)
                                 for k in ("observations", "actions", "next_observations"))
        with torch.no_grad():
            for i in range(0, n_aug, BLOCK):  # the same rows and noise as one pass over all of them
                j = min(n_aug, i + BLOCK)
                s, p = src[i:j], partner[i:j]
                mean_q, logvar_q = (x[0] for x in ivae.encode(T("observations", s), T("actions", s),
                                                              T("next_observations", s), T("aux", s)))
                u = mean_q if args.posterior == "mean" else mean_q + (0.5 * logvar_q).exp() * torch.randn(mean_q.shape, generator=gen)
                s_cf[i:j] = ivae.decode(T("observations", p), T("actions", p), u)[0].numpy()
                a_cf[i:j] = sample_actions(actor, norm, s_cf[i:j], gen) if sample_labels else label(s_cf[i:j])
                s_next_cf[i:j] = ivae.decode(torch.as_tensor(s_cf[i:j]), torch.as_tensor(a_cf[i:j]), u)[0].numpy()
    else:  # counterfactual with a label filter, or reconstruct (the authors' code): one pass
        with torch.no_grad():
            mean_q, logvar_q = (x[0] for x in ivae.encode(T("observations", src), T("actions", src),
                                                          T("next_observations", src), T("aux", src)))
            u = mean_q if args.posterior == "mean" else mean_q + (0.5 * logvar_q).exp() * torch.randn(mean_q.shape, generator=gen)
            if args.mode == "counterfactual":
                partner = rng.choice(unl_rows, n_draw)
                s_cf = ivae.decode(T("observations", partner), T("actions", partner), u)[0].numpy()
                if support:  # keep the n_aug candidates whose s~' lies nearest a D_E state, then label those
                    ref = exp_rows
                    if len(ref) > args.support_reference:
                        ref = np.sort(np.random.default_rng([args.seed, 2]).choice(ref, args.support_reference, replace=False))
                    scale = state_scale(data["observations"])
                    dist = support_distance(s_cf, data["observations"][ref], scale)
                    keep = np.sort(np.argsort(dist, kind="stable")[:n_aug])
                    sup_facts = {"candidates": int(n_draw), "kept": int(len(keep)), "reference_rows": int(len(ref)),
                                 "distance_threshold": float(dist[keep].max()) if len(keep) else None,
                                 "distance_all": quantiles(dist), "distance_kept": quantiles(dist[keep])}
                    src, partner, s_cf, u = src[keep], partner[keep], s_cf[keep], u[keep]
                if ensemble:  # the members' mean label; keep the n_aug candidates whose labels disagree least
                    a_cf, disagree = ensemble_labels(member_policies, s_cf, low, high)
                    keep = np.sort(np.argsort(disagree, kind="stable")[:n_aug])
                    ens_facts = {"members": members, "candidates": int(n_draw), "kept": int(len(keep)),
                                 "disagreement_threshold": float(disagree[keep].max()) if len(keep) else None,
                                 "disagreement_all": quantiles(disagree), "disagreement_kept": quantiles(disagree[keep])}
                    src, partner, s_cf, a_cf, u = src[keep], partner[keep], s_cf[keep], a_cf[keep], u[keep]
                else:
                    a_cf = sample_actions(actor, norm, s_cf, gen) if sample_labels else label(s_cf)
            else:  # the authors' path: a noisy re-sample of the expert's own s', labelled with a policy sample
                partner = np.full(n_aug, -1)
                s_src = T("observations", src)
                delta_n = ivae.decode_delta(s_src, T("actions", src), u)[0]
                delta_n = delta_n + (0.5 * ivae.decoder_logvar).exp() * torch.randn(delta_n.shape, generator=gen)
                s_cf = (s_src + delta_n * ivae.delta_std + ivae.delta_mean).numpy()
                a_cf = sample_actions(actor, norm, s_cf, gen)
            s_next_cf = ivae.decode(torch.as_tensor(s_cf), torch.as_tensor(a_cf), u)[0].numpy()
            del mean_q, logvar_q, u  # gigabytes each on a CausalWorld dataset: freed before the arrays are joined

    # 3. the augmented dataset
    N = len(data["rewards"])
    new = {"observations": s_cf, "actions": a_cf, "next_observations": s_next_cf,
           "rewards": np.zeros(n_aug, np.float32), "terminals": np.zeros(n_aug, bool), "timeouts": np.zeros(n_aug, bool),
           "episode_ids": np.full(n_aug, -1), "aux": data["aux"][src], "expert": np.ones(n_aug, bool),
           "episode_returns": data["episode_returns"][src], "augmented": np.ones(n_aug, bool),
           "aug_source": src, "aug_partner": partner}
    if "exogenous" in data:
        new["exogenous"] = data["exogenous"][src]
    new.update(extra)  # expert_data: the real rewards, classes, returns and u of the collected rows
    if "policy_ids" in data:
        new["policy_ids"] = np.full(n_aug, -1)
    old = {**data, "augmented": np.zeros(N, bool), "aug_source": np.full(N, -1), "aug_partner": np.full(N, -1)}
    if spill is None:
        arrays = {k: np.concatenate([old[k], new[k]]).astype(old[k].dtype, copy=False) for k in new}
        for parts in (old, new, data):  # from here on only `arrays` is written: the parts it was joined from are freed
            parts.clear()
    else:  # larger than memory: the collected rows (mapped) and the new ones (spilled), written block by block
        arrays = {k: joined(old[k], new[k]) for k in new}
    del s_cf, a_cf, s_next_cf, extra
    meta = {**meta, "augmentation": {**recorded(args), "n_augmented": n_aug, "n_expert_rows": int(len(exp_rows)),
                                     "n_unlabelled_rows": int(len(unl_rows)), "sampler_bc_loss": sampler_loss,
                                     "sampler_facts": sampler_facts(args, sampler_art, uses_sampler, members)}}
    if ens_facts is not None:
        meta["augmentation"]["ensemble"] = ens_facts
    if sup_facts is not None:
        meta["augmentation"]["support"] = sup_facts
    arrays["metadata"] = contract.dataset_arrays_from_meta(meta)
    # checked before it takes --out's place (a spilled one as written, stored uncompressed as its input), and only
    # then the sampler and ensemble members beside it: a dataset the contract refuses leaves nothing behind
    envs.save_dataset(args.out, arrays, compress=spill is None)
    if uses_sampler and not args.sampler:
        contract.save_policy(args.sampler_out, sampler_art)
    for path, art in zip(member_outs, member_arts):
        contract.save_policy(path, art)
    print(f"wrote {args.out}: {N} collected rows + {n_aug} augmented ({args.mode}); augmented D_E / D_U = "
          f"{(len(exp_rows) + n_aug) / max(1, len(unl_rows)):.3f} ({time.time() - t0:.1f}s)")
    return {"path": args.out, "n_augmented": n_aug}


if __name__ == "__main__":
    cli.run(main, Args)
