"""Offline choice of OILCA's sampler π̂_E (docs/sampler.md), by one of two rules, from data alone (no rollouts).

OILCA labels each counterfactual state s~' with a~' = π̂_E(s~') (Alg. 1 line 8), so the sampler should act like the
expert on states it has not seen. n(a) = 2 (a - low) / (high - low) - 1 maps actions to [-1, 1] by the dataset's
action bounds (metadata action_low, action_high), so every action dimension weighs the same.

`--rule heldout` (the default): K-fold cross-validation over the expert episodes,

    score(c) = (1/K) Σ_k  mean_{(s, a) ∈ H_k} (1/|A|) ‖ n(π_c^{-k}(s)) - n(a) ‖²,      choice = argmin_c score(c)

where H_k is fold k's held-out D_E episodes (cv_split.py --heldout-out), π_c^{-k} the deterministic policy of
candidate c trained by its own trainer on the dataset without those episodes (cv_split.py --out). Ties go to the
first candidate in --candidates order. The chosen candidate's full-data policies, one per seed, are copied.

`--rule discriminator`: a discriminator D(s, a) = σ(f(n_s(s), n(a))) (MLP 2×256 ReLU, n_s the dataset's observation
standardisation over all rows) is fit to tell D_E rows (label 1) from D_U rows (label 0) of --dataset (collected rows
only) by the logistic loss on class-balanced batches, L = ½ E_E[-log D] + ½ E_U[-log(1 - D)] (Adam); then

    score_s(c) = mean_{s ∈ S_U} log D(s, π_c^s(s)),      choice_s = argmax_c score_s(c)

with S_U the D_U observations (all, or a seeded subsample of --disc-rows) and π_c^s candidate c's full-data policy of
training seed s. Ties go to the first candidate; each seed's own choice is copied to its --out-policy, and `choice`
is the candidate chosen by most seeds (a tie between counts: the higher mean score, then --candidates order). The
rule scores the candidates on the states OILCA labels (made from D_U partners) rather than on expert states; it
uses no folds, so --folds, --heldout, --fold-dataset and --fold-policy are ignored and not checked.

Inputs (path templates; `{fold}`, `{candidate}` and `{seed}` are filled in):
  --dataset          the full dataset D_all;
  --heldout          fold k's held-out episodes, --fold-dataset fold k's training dataset (cv_split.py, k < --folds);
  --fold-policy      candidate c's policy artifact (policy.pt) trained on fold k's dataset;
  --full-policy      candidate c's policy artifact trained on --dataset with seed s (s in --seeds).
Before scoring, the wiring is checked: every held-out / fold file pair is fold k of one cv_split.py run on
--dataset (same seed and folds, the same held-out episodes, the source's fingerprint), the folds' held-out episodes
are disjoint and cover D_E, each fold policy was trained on its fold dataset and each full policy on --dataset
(the artifact's dataset_fingerprint), each policy's method is its candidate's name and its seed the template's,
and dims and action bounds agree with the dataset (the discriminator rule checks the full policies only).

Outputs, written only after every input has passed:
  --out         JSON: rule, candidates, folds, cv_seed, scores {candidate: {per_fold, mean}}, choice, held-out
                episodes and row counts per fold, inputs (paths and fingerprints), out_policies. It has no `method`,
                `seed`, `split` or `returns` key, so report.py skips it beside the result files. The discriminator
                rule writes the same keys (folds, cv_seed, heldout_* null), scores {candidate: {per_seed, mean}},
                choice_per_seed, and `discriminator`: its settings, fit and reference scores.
  --out-result  with --results (candidate c's full-data result of seed s and split): per seed and split, the chosen
                candidate's result (seed s's choice, with the discriminator rule) copied with method
                --selected-method, `source_result` and `sampler_selection` {candidate, rule, record}; used to choose a
                variant of OILCA (the ensemble's keep share, the self-improving round) the same way as a sampler.
  --out-policy  per seed s: the chosen candidate's (seed s's choice, with the discriminator rule) full-data artifact
                for seed s, unchanged weights, seed and dataset_fingerprint (so `augment.py --sampler` accepts it),
                method "sampler_selected", plus selected_from (the candidate), selection (--out) and source_policy
                (the copied file). Not written with --report-only (out_policies is then []).
"""

import json
import time
from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from training.policy import Normalizer

RULE = ("K-fold cross-validation over the expert episodes D_E (cv_split.py): candidate c is trained on D_all without "
        "fold k's D_E episodes and scored by the mean squared error between its deterministic action and the held-out "
        "expert's recorded action, both scaled to [-1, 1] by the dataset's action bounds (mean over rows and action "
        "dims); score = mean over the K folds; choice = the lowest score, ties to the first in --candidates order")
RULE_DISCRIMINATOR = (
    "discriminator on D_U states: D(s, a) is fit to tell D_E rows (label 1) from D_U rows (label 0) of --dataset "
    "(collected rows; logistic loss, class-balanced batches; standardised observation and action scaled to [-1, 1]); "
    "candidate c's score for training seed s is the mean over D_U observations s' of log D(s', pi_c^s(s')) with "
    "pi_c^s its full-data deterministic policy; per seed the highest score is chosen, ties to the first in "
    "--candidates order; choice = the candidate chosen by most seeds (a tie: the higher mean score)")
SCORE_CHUNK = 65_536  # rows per forward pass when scoring


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """the full dataset D_all, split by cv_split.py and the full-data policies' training data"""
    rule: Literal["heldout", "discriminator"] = "heldout"
    """heldout: K-fold held-out action error on D_E episodes; discriminator: log D(s, π_c(s)) on D_U states"""
    folds: int = 3
    """number of folds K (cv_split.py --folds); heldout rule only"""
    candidates: Tuple[str, ...] = ("bc_exp", "bc_all", "dwbc")
    """candidate samplers: each name is the method recorded in its policy artifacts"""
    heldout: str = "data/toy_cv3_f{fold}_heldout.npz"
    """template: fold k's held-out D_E episodes (cv_split.py --heldout-out); heldout rule only"""
    fold_dataset: str = "data/toy_cv3_f{fold}.npz"
    """template: fold k's training dataset (cv_split.py --out); heldout rule only"""
    fold_policy: str = "runs/toy/select/{candidate}_f{fold}/policy.pt"
    """template: candidate c's policy trained on fold k's dataset; heldout rule only"""
    full_policy: str = "runs/toy/{candidate}_s{seed}/policy.pt"
    """template: candidate c's policy trained on --dataset with seed s"""
    seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    """training seeds of the full-data policies; one --out-policy each"""
    out: str = "results/toy/sampler_selection.json"
    """output: the selection record (JSON)"""
    out_policy: str = "runs/toy/sampler_selected_s{seed}/policy.pt"
    """template: output, the chosen candidate's full-data policy for seed s (give it to augment.py --sampler)"""
    report_only: bool = False
    """write the --out record only, no --out-policy (compare rules on existing runs without touching the samplers)"""
    results: Optional[str] = None
    """template: candidate c's full-data result of seed s and split ({candidate}, {seed}, {split}); with --out-result"""
    out_result: Optional[str] = None
    """template: output, seed s's result of the chosen candidate ({seed}, {split}), as method --selected-method (a
    variant chosen without rollouts, e.g. the ensemble's keep share or the self-improving round)"""
    selected_method: str = "oilca_selected"
    """the method label of the --out-result files"""
    splits: Tuple[str, ...] = ("train", "heldout")
    """evaluation splits of --results"""
    threads: int = 1
    """torch CPU threads"""
    seed: int = 0
    """discriminator rule: seed of D's initialisation, its minibatches and the D_U subsample"""
    disc_steps: int = 5_000
    """discriminator rule: Adam steps of D"""
    disc_batch_size: int = 256
    """discriminator rule: rows per step, half D_E and half D_U"""
    disc_lr: float = 1e-4
    """discriminator rule: Adam learning rate of D"""
    disc_hidden: int = 256
    """discriminator rule: width of D's two hidden layers"""
    disc_rows: int = 20_000
    """discriminator rule: D_U observations scored (a seeded subsample where D_U has more; 0: all)"""


def fill(template: str, **values) -> str:
    """`template` with `{name}` replaced by each value (no other brace is interpreted)."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template


def scaled(a: np.ndarray, low: Sequence[float], high: Sequence[float]) -> np.ndarray:
    """Actions mapped from [low, high] to [-1, 1] per dimension."""
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    return 2 * (np.asarray(a, np.float64) - low) / (high - low) - 1


def action_mse(pred: np.ndarray, target: np.ndarray, low: Sequence[float], high: Sequence[float]) -> float:
    """Mean over rows and action dims of the squared error between actions scaled to [-1, 1]."""
    return float(np.mean((scaled(pred, low, high) - scaled(target, low, high)) ** 2))


def choose(scores: Dict[str, float], candidates: Sequence[str], higher: bool = False) -> str:
    """The candidate with the lowest score (the highest with `higher`); ties go to the first in `candidates` order."""
    best = candidates[0]
    for c in candidates[1:]:
        if (scores[c] > scores[best]) if higher else (scores[c] < scores[best]):
            best = c
    return best


def most_chosen(per_seed: Sequence[str], candidates: Sequence[str], means: Dict[str, float]) -> str:
    """The candidate chosen by most seeds; a tie between counts goes to the higher mean score, then to the first in
    `candidates` order."""
    counts = {c: list(per_seed).count(c) for c in candidates}
    tied = [c for c in candidates if counts[c] == max(counts.values())]
    return choose(means, tied, higher=True)


def check_args(args: Args) -> None:
    if args.rule not in ("heldout", "discriminator"):
        raise ValueError(f"--rule must be heldout or discriminator, got {args.rule!r}")
    heldout = args.rule == "heldout"
    rules = dict(folds=checks.Int(2)) if heldout else dict(
        seed=checks.SEED, disc_steps=checks.COUNT, disc_batch_size=checks.Int(2), disc_lr=checks.RATE,
        disc_hidden=checks.COUNT, disc_rows=checks.COUNT0)
    checks.fields(args, seeds=checks.SEED, candidates=checks.LABEL, threads=checks.COUNT, **rules)
    for flag, values in (("--candidates", args.candidates), ("--seeds", args.seeds)):
        if not values:
            raise ValueError(f"{flag} needs at least one value")
        if len(set(values)) != len(values):
            raise ValueError(f"{flag} lists a value twice: {list(values)}")
    templates = [("--heldout", args.heldout, ("fold",)), ("--fold-dataset", args.fold_dataset, ("fold",)),
                 ("--fold-policy", args.fold_policy, ("candidate", "fold"))] if heldout else []
    templates.append(("--full-policy", args.full_policy, ("candidate", "seed")))
    if not args.report_only:
        templates.append(("--out-policy", args.out_policy, ("seed",)))
    if (args.results is None) != (args.out_result is None):
        raise ValueError("--results and --out-result go together (the candidates' results, the chosen one's copies)")
    if args.results is not None:
        checks.fields(args, selected_method=checks.LABEL)
        if not args.splits or len(set(args.splits)) != len(args.splits):
            raise ValueError(f"--splits needs distinct values, got {list(args.splits)}")
        templates += [("--results", args.results, ("candidate", "seed", "split")),
                      ("--out-result", args.out_result, ("seed", "split"))]
    for flag, template, names in templates:
        missing = [n for n in names if "{" + n + "}" not in template]
        if missing:
            raise ValueError(f"{flag} {template} must contain " + " and ".join("{" + n + "}" for n in missing))
def cv_record(path: str, data: dict, part: str, fold: int, folds: int, source_fp: str) -> dict:
    """The cv_split record of a fold file, checked to be fold `fold` of `folds` of the source with `source_fp`."""
    rec = data["metadata"].get("cv_split")
    if not isinstance(rec, dict):
        raise contract.ContractError(f"{path}: not written by cv_split.py (no metadata 'cv_split')")
    want = {"part": part, "fold": fold, "folds": folds}
    for key, value in want.items():
        if rec.get(key) != value:
            raise contract.ContractError(f"{path}: cv_split {key} is {rec.get(key)!r}, expected {value!r} "
                                         f"(fold {fold} of {folds}, the {part} part)")
    if rec.get("source_fingerprint") != source_fp:
        raise contract.ContractError(f"{path}: split from another dataset than --dataset (source fingerprint "
                                     f"{rec.get('source_fingerprint')}, --dataset has {source_fp})")
    return rec


def check_policy(path: str, art: dict, candidate: str, fingerprint: str, data_path: str, meta: dict) -> None:
    """A candidate's artifact: its method, the dataset it was trained on, its dims and action bounds."""
    if art["method"] != candidate:
        raise contract.ContractError(f"{path}: a '{art['method']}' policy, not candidate '{candidate}' (check the "
                                     f"template, or train it with --method {candidate})")
    if art["dataset_fingerprint"] != fingerprint:
        raise contract.ContractError(f"{path}: trained on another dataset than {data_path}")
    cfg = art["config"]
    if (cfg["obs_dim"], cfg["act_dim"]) != (meta["obs_dim"], meta["act_dim"]):
        raise contract.ContractError(f"{path}: obs_dim, act_dim = {(cfg['obs_dim'], cfg['act_dim'])} but {data_path} "
                                     f"has {(meta['obs_dim'], meta['act_dim'])}")
    if not (np.allclose(art["action_low"], meta["action_low"]) and np.allclose(art["action_high"], meta["action_high"])):
        raise contract.ContractError(f"{path}: action bounds differ from those of {data_path}")


def load_full_policies(args: Args, full_pol: Dict[str, List[str]], fp: str, meta: dict) -> dict:
    """Every candidate's full-data artifact per seed, {(candidate, seed): artifact}, each checked."""
    full_arts = {}
    for c in args.candidates:
        for s, path in zip(args.seeds, full_pol[c]):
            art = contract.load_policy(path)
            check_policy(path, art, c, fp, args.dataset, meta)
            if art["seed"] != s:
                raise contract.ContractError(f"{path}: trained with seed {art['seed']}, not {s} (--full-policy, --seeds)")
            full_arts[c, s] = art
    return full_arts


class Discriminator(nn.Module):
    """D(s, a) as a logit: an MLP over [standardised observation ‖ action in [-1, 1]], `hidden` × 2 ReLU."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, act], -1)).squeeze(-1)


def logistic_loss(logit_e: torch.Tensor, logit_u: torch.Tensor) -> torch.Tensor:
    """½ E_E[-log D] + ½ E_U[-log(1 - D)] with D = σ(logit): each class weighs half, whatever the batch split."""
    return 0.5 * (-F.logsigmoid(logit_e)).mean() + 0.5 * (-F.logsigmoid(-logit_u)).mean()


@torch.no_grad()
def mean_log_d(disc: Discriminator, obs: np.ndarray, act: np.ndarray, of=F.logsigmoid) -> float:
    """Mean over rows of log D(obs, act) (`of=torch.sigmoid`: of D), inputs standardised / scaled, in chunks."""
    total = 0.0
    for i in range(0, len(obs), SCORE_CHUNK):
        logit = disc(torch.as_tensor(obs[i:i + SCORE_CHUNK]), torch.as_tensor(act[i:i + SCORE_CHUNK]))
        total += of(logit).double().sum().item()
    return total / len(obs)


def heldout_rule(args: Args, data: dict, fp: str, full_pol: Dict[str, List[str]], heldouts: List[str],
                 fold_data: List[str], fold_pol: Dict[str, List[str]]) -> Tuple[dict, dict]:
    """The K-fold held-out score: (record without out_policies, full-data artifacts)."""
    K, C, meta = range(args.folds), list(args.candidates), data["metadata"]
    # the per-fold held-out episodes and training datasets of one cv_split.py run
    held, fold_fps, cv_seed, held_eps = [], [], None, []
    for k in K:
        h = envs.load_dataset(heldouts[k])
        rec = cv_record(heldouts[k], h, "heldout", k, args.folds, fp)
        if not h["expert"].all():
            raise contract.ContractError(f"{heldouts[k]}: holds non-expert rows; a held-out file holds D_E episodes only")
        f = envs.load_dataset(fold_data[k])
        frec = cv_record(fold_data[k], f, "train", k, args.folds, fp)
        if (frec.get("seed"), frec.get("heldout_episodes")) != (rec.get("seed"), rec.get("heldout_episodes")):
            raise contract.ContractError(f"{fold_data[k]}: not the complement of {heldouts[k]} (another cv_split.py "
                                         f"seed or fold)")
        if cv_seed is None:
            cv_seed = rec.get("seed")
        if rec.get("seed") != cv_seed:
            raise contract.ContractError(f"{heldouts[k]}: split with seed {rec.get('seed')}, fold 0 with {cv_seed}")
        held.append(h)
        fold_fps.append(contract.fingerprint(f))
        held_eps.append(sorted(np.unique(h["episode_ids"]).tolist()))
    expert_eps = sorted(np.unique(data["episode_ids"][data["expert"]]).tolist())
    covered = sorted(sum(held_eps, []))
    if covered != expert_eps:
        raise ValueError(f"--heldout: the {args.folds} folds hold out episodes {covered}, not each D_E episode of "
                         f"{args.dataset} once ({expert_eps})")

    # the candidates: every fold policy and full-data policy, checked before any scoring
    per_fold: Dict[str, List[float]] = {c: [] for c in C}
    for c in C:
        for k in K:
            art = contract.load_policy(fold_pol[c][k])
            check_policy(fold_pol[c][k], art, c, fold_fps[k], fold_data[k], meta)
            pred = contract.build_policy(art)(held[k]["observations"])
            per_fold[c].append(action_mse(pred, held[k]["actions"], meta["action_low"], meta["action_high"]))
    full_arts = load_full_policies(args, full_pol, fp, meta)
    scores = {c: float(np.mean(per_fold[c])) for c in C}
    choice = choose(scores, C)
    record = {"rule": RULE, "candidates": C, "folds": args.folds, "cv_seed": cv_seed, "choice": choice,
              "scores": {c: {"per_fold": per_fold[c], "mean": scores[c]} for c in C},
              "heldout_episodes": held_eps, "heldout_rows": [int(len(h["rewards"])) for h in held],
              "inputs": {"dataset": args.dataset, "dataset_fingerprint": fp, "heldout": heldouts,
                         "fold_dataset": fold_data, "fold_dataset_fingerprints": fold_fps, "fold_policy": fold_pol,
                         "full_policy": full_pol, "seeds": list(args.seeds)}}
    width = max(len(c) for c in C + ["candidate"])
    print(f"{'candidate':<{width}}  " + "  ".join(f"fold {k:<4}" for k in K) + "  mean")
    for c in C:
        print(f"{c:<{width}}  " + "  ".join(f"{x:<9.5f}" for x in per_fold[c]) + f"  {scores[c]:.5f}"
              + ("  <- chosen" if c == choice else ""))
    return record, full_arts


def discriminator_rule(args: Args, data: dict, fp: str, full_pol: Dict[str, List[str]]) -> Tuple[dict, dict]:
    """The discriminator score on D_U states: (record without out_policies, full-data artifacts)."""
    C, meta = list(args.candidates), data["metadata"]
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    exp_rows, unl_rows = np.flatnonzero(data["expert"] & ~aug), np.flatnonzero(~data["expert"] & ~aug)
    for rows, what in ((exp_rows, "D_E (no collected row has expert=True)"),
                       (unl_rows, "D_U (every collected row is expert)")):
        if len(rows) == 0:
            raise contract.ContractError(f"{args.dataset}: {what} is empty: the discriminator rule needs both")
    full_arts = load_full_policies(args, full_pol, fp, meta)  # every policy checked before D is trained

    # inputs of D: observations standardised over all rows (+1e-3, as the trainers do), actions in [-1, 1]
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])
    obs, act = norm.obs(data["observations"]), norm.act(data["actions"])
    batch_rng, rows_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(args.seed).spawn(2))
    scored = unl_rows
    if args.disc_rows and len(unl_rows) > args.disc_rows:  # a seeded subsample S_U of the D_U observations
        scored = np.sort(rows_rng.choice(unl_rows, args.disc_rows, replace=False))

    # fit D: D_E rows labelled 1, D_U rows labelled 0, half a batch each
    torch.manual_seed(args.seed)
    disc = Discriminator(meta["obs_dim"], meta["act_dim"], args.disc_hidden)
    opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr)
    obs_t, act_t = torch.as_tensor(obs), torch.as_tensor(act)
    half, start = args.disc_batch_size // 2, time.time()
    log_every = max(1, args.disc_steps // 5)
    for step in range(1, args.disc_steps + 1):
        idx = torch.as_tensor(np.concatenate([batch_rng.choice(exp_rows, half),
                                              batch_rng.choice(unl_rows, args.disc_batch_size - half)]))
        logit = disc(obs_t[idx], act_t[idx])
        loss = logistic_loss(logit[:half], logit[half:])  # ½ E_E[-log D] + ½ E_U[-log(1 - D)]
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % log_every == 0 or step == args.disc_steps:
            row = {"loss": loss.item(), "d_expert": torch.sigmoid(logit[:half]).mean().item(),
                   "d_unlabelled": torch.sigmoid(logit[half:]).mean().item()}
            checks.finite_losses(row, step, "discriminator")
            print(f"discriminator step {step}/{args.disc_steps}: loss {row['loss']:.4f}, D on D_E {row['d_expert']:.3f}, "
                  f"on D_U {row['d_unlabelled']:.3f} ({step / (time.time() - start):.0f} steps/s)")
    disc.eval()

    # score: mean over S_U of log D(s, π_c^s(s)), per candidate and training seed
    per_seed: Dict[str, List[float]] = {c: [] for c in C}
    for c in C:
        for s in args.seeds:
            policy = contract.build_policy(full_arts[c, s])
            pred = np.concatenate([policy(data["observations"][scored[i:i + SCORE_CHUNK]])
                                   for i in range(0, len(scored), SCORE_CHUNK)])
            per_seed[c].append(mean_log_d(disc, obs[scored], norm.act(pred)))
    means = {c: float(np.mean(per_seed[c])) for c in C}
    choice_per_seed = [choose({c: per_seed[c][i] for c in C}, C, higher=True) for i in range(len(args.seeds))]
    choice = most_chosen(choice_per_seed, C, means)
    d_rows = {name: mean_log_d(disc, obs[rows], act[rows], of=torch.sigmoid) for name, rows in
              (("d_expert_rows", exp_rows), ("d_unlabelled_rows", unl_rows))}  # mean D on its training rows
    fit = {"seed": args.seed, "steps": args.disc_steps, "batch_size": args.disc_batch_size, "lr": args.disc_lr,
           "hidden": args.disc_hidden, "threads": args.threads, "final_loss": row["loss"], **d_rows,
           "n_expert_rows": int(len(exp_rows)), "n_unlabelled_rows": int(len(unl_rows)), "n_scored_rows": int(len(scored)),
           "score_of_recorded_du_actions": mean_log_d(disc, obs[scored], act[scored]),
           "seconds": round(time.time() - start, 2)}
    record = {"rule": RULE_DISCRIMINATOR, "candidates": C, "folds": None, "cv_seed": None, "choice": choice,
              "choice_per_seed": choice_per_seed,
              "scores": {c: {"per_seed": per_seed[c], "mean": means[c]} for c in C},
              "heldout_episodes": None, "heldout_rows": None, "discriminator": fit,
              "inputs": {"dataset": args.dataset, "dataset_fingerprint": fp, "full_policy": full_pol,
                         "seeds": list(args.seeds)}}
    width = max(len(c) for c in C + ["candidate"])
    print(f"{'candidate':<{width}}  " + "  ".join(f"seed {s:<5}" for s in args.seeds) + "  mean   (log D on "
          f"{len(scored)} D_U states; * = the seed's choice; D_U's recorded actions score "
          f"{fit['score_of_recorded_du_actions']:.4f})")
    for c in C:
        print(f"{c:<{width}}  " + "  ".join(f"{x:<9.4f}" + ("*" if c == ch else " ")
                                            for x, ch in zip(per_seed[c], choice_per_seed))
              + f"  {means[c]:.4f}" + ("  <- chosen (most seeds)" if c == choice else ""))
    return record, full_arts


def read_result(path: str) -> dict:
    """A result JSON (evaluate.py's, a trainer's --final-eval): a dict with its `returns` list."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise contract.ContractError(f"{path}: cannot be read as JSON ({e})") from None
    if not isinstance(r, dict) or not isinstance(r.get("returns"), list):
        raise contract.ContractError(f"{path}: not a result JSON (no returns)")
    return r


def load_result(path: str, candidate: str, seed: int, split: str) -> dict:
    """A candidate's full-data result JSON of one seed and split, checked."""
    r = read_result(path)
    if "sampler_selection" in r:
        raise contract.ContractError(f"{path}: a selected result already; give each candidate's own results")
    if (r.get("method"), r.get("seed"), r.get("split")) != (candidate, seed, split):
        raise contract.ContractError(f"{path}: the result of {r.get('method')!r}, seed {r.get('seed')}, split "
                                     f"{r.get('split')!r}, not {candidate!r}, {seed}, {split!r} (--results)")
    return r


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> dict:
    check_args(args)
    C, heldout = list(args.candidates), args.rule == "heldout"
    full_pol = {c: [fill(args.full_policy, candidate=c, seed=s) for s in args.seeds] for c in C}
    out_pol = [] if args.report_only else [fill(args.out_policy, seed=s) for s in args.seeds]
    inputs = {"--dataset": args.dataset}
    if heldout:
        K = range(args.folds)
        inputs.update({"--heldout": [fill(args.heldout, fold=k) for k in K],
                       "--fold-dataset": [fill(args.fold_dataset, fold=k) for k in K]})
        fold_pol = {c: [fill(args.fold_policy, candidate=c, fold=k) for k in K] for c in C}
        inputs["--fold-policy"] = sum(fold_pol.values(), [])
    inputs["--full-policy"] = sum(full_pol.values(), [])
    res_in, res_out = {}, {}
    if args.results is not None:
        res_in = {(c, s, sp): fill(args.results, candidate=c, seed=s, split=sp) for c in C for s in args.seeds
                  for sp in args.splits}
        res_out = {(s, sp): fill(args.out_result, seed=s, split=sp) for s in args.seeds for sp in args.splits}
        inputs["--results"] = list(res_in.values())
    contract.check_paths(inputs, files={"--out": args.out, "--out-policy": out_pol, "--out-result": list(res_out.values())})

    data = envs.load_dataset(args.dataset)
    fp = contract.fingerprint(data)
    torch.set_num_threads(args.threads)
    if heldout:
        record, full_arts = heldout_rule(args, data, fp, full_pol, inputs["--heldout"], inputs["--fold-dataset"], fold_pol)
        chosen = [record["choice"]] * len(args.seeds)
    else:
        record, full_arts = discriminator_rule(args, data, fp, full_pol)
        chosen = record["choice_per_seed"]

    full_res = {key: load_result(path, *key) for key, path in res_in.items()}  # every result checked first

    # the outputs: each seed's chosen full-data artifact (none with --report-only), its results, then the record
    for path in out_pol + list(res_out.values()) + [args.out]:
        contract.claim(path)  # a second writer to the same output is refused while this run goes on
    for (s, sp), path in res_out.items():
        c = chosen[list(args.seeds).index(s)]
        contract.save_json(path, {**full_res[c, s, sp], "method": args.selected_method, "source_result": res_in[c, s, sp],
                                  "sampler_selection": {"candidate": c, "rule": record["rule"], "record": args.out}})
    record["out_results"] = list(res_out.values())
    for s, c, path in zip(args.seeds, chosen, out_pol):
        src = full_pol[c][list(args.seeds).index(s)]
        contract.save_policy(path, {**full_arts[c, s], "method": "sampler_selected", "selected_from": c,
                                    "selection": args.out, "source_policy": src})
    record["out_policies"] = out_pol
    contract.save_json(args.out, record)
    if out_pol:
        print(f"wrote {args.out} and {len(out_pol)} policies ({out_pol[0]} …): sampler = {record['choice']}"
              + ("" if heldout else f" (per seed: {' '.join(chosen)})"))
    else:
        print(f"wrote {args.out} (--report-only: no policies): sampler = {record['choice']}"
              + ("" if heldout else f" (per seed: {' '.join(chosen)})"))
    return record


if __name__ == "__main__":
    cli.run(main, Args)
