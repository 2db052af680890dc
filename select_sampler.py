"""Offline choice of OILCA's sampler π̂_E by K-fold cross-validation over the expert episodes (docs/sampler.md).

OILCA labels each counterfactual state s~' with a~' = π̂_E(s~') (Alg. 1 line 8), so the sampler should act like the
expert on states it has not seen. The rule, from data alone (no rollouts):

    score(c) = (1/K) Σ_k  mean_{(s, a) ∈ H_k} (1/|A|) ‖ n(π_c^{-k}(s)) - n(a) ‖²,      choice = argmin_c score(c)

where H_k is fold k's held-out D_E episodes (cv_split.py --heldout-out), π_c^{-k} the deterministic policy of
candidate c trained by its own trainer on the dataset without those episodes (cv_split.py --out), and
n(a) = 2 (a - low) / (high - low) - 1 maps actions to [-1, 1] by the dataset's action bounds (metadata action_low,
action_high), so every action dimension weighs the same. Ties go to the first candidate in --candidates order.

Inputs (path templates; `{fold}`, `{candidate}` and `{seed}` are filled in):
  --dataset          the full dataset D_all;
  --heldout          fold k's held-out episodes, --fold-dataset fold k's training dataset (cv_split.py, k < --folds);
  --fold-policy      candidate c's policy artifact (policy.pt) trained on fold k's dataset;
  --full-policy      candidate c's policy artifact trained on --dataset with seed s (s in --seeds).
Before scoring, the wiring is checked: every held-out / fold file pair is fold k of one cv_split.py run on
--dataset (same seed and folds, the same held-out episodes, the source's fingerprint), the folds' held-out episodes
are disjoint and cover D_E, each fold policy was trained on its fold dataset and each full policy on --dataset
(the artifact's dataset_fingerprint), each policy's method is its candidate's name and its seed the template's,
and dims and action bounds agree with the dataset.

Outputs, written only after every input has passed:
  --out         JSON: rule, candidates, folds, cv_seed, scores {candidate: {per_fold, mean}}, choice, held-out
                episodes and row counts per fold, inputs (paths and fingerprints), out_policies. It has no `method`,
                `seed`, `split` or `returns` key, so report.py skips it beside the result files.
  --out-policy  per seed s: the chosen candidate's full-data artifact for seed s, unchanged weights, seed and
                dataset_fingerprint (so `augment.py --sampler` accepts it), method "sampler_selected", plus
                selected_from (the candidate), selection (--out) and source_policy (the copied file).
"""

import sys
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import tyro

import checks
import contract

RULE = ("K-fold cross-validation over the expert episodes D_E (cv_split.py): candidate c is trained on D_all without "
        "fold k's D_E episodes and scored by the mean squared error between its deterministic action and the held-out "
        "expert's recorded action, both scaled to [-1, 1] by the dataset's action bounds (mean over rows and action "
        "dims); score = mean over the K folds; choice = the lowest score, ties to the first in --candidates order")


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """the full dataset D_all, split by cv_split.py and the full-data policies' training data"""
    folds: int = 3
    """number of folds K (cv_split.py --folds)"""
    candidates: Tuple[str, ...] = ("bc_exp", "bc_all", "dwbc")
    """candidate samplers: each name is the method recorded in its policy artifacts"""
    heldout: str = "data/toy_cv3_f{fold}_heldout.npz"
    """template: fold k's held-out D_E episodes (cv_split.py --heldout-out)"""
    fold_dataset: str = "data/toy_cv3_f{fold}.npz"
    """template: fold k's training dataset (cv_split.py --out)"""
    fold_policy: str = "runs/toy/select/{candidate}_f{fold}/policy.pt"
    """template: candidate c's policy trained on fold k's dataset"""
    full_policy: str = "runs/toy/{candidate}_s{seed}/policy.pt"
    """template: candidate c's policy trained on --dataset with seed s"""
    seeds: Tuple[int, ...] = (0, 1, 2, 3, 4)
    """training seeds of the full-data policies; one --out-policy each"""
    out: str = "results/toy/sampler_selection.json"
    """output: the selection record (JSON)"""
    out_policy: str = "runs/toy/sampler_selected_s{seed}/policy.pt"
    """template: output, the chosen candidate's full-data policy for seed s (give it to augment.py --sampler)"""
    threads: int = 1
    """torch CPU threads (scoring only runs the policies forward)"""


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


def choose(scores: Dict[str, float], candidates: Sequence[str]) -> str:
    """The candidate with the lowest score; ties go to the first in `candidates` order."""
    best = candidates[0]
    for c in candidates[1:]:
        if scores[c] < scores[best]:
            best = c
    return best


def check_args(args: Args) -> None:
    checks.fields(args, folds=checks.Int(2), seeds=checks.SEED, candidates=checks.LABEL, threads=checks.COUNT)
    for flag, values in (("--candidates", args.candidates), ("--seeds", args.seeds)):
        if not values:
            raise ValueError(f"{flag} needs at least one value")
        if len(set(values)) != len(values):
            raise ValueError(f"{flag} lists a value twice: {list(values)}")
    for flag, template, names in (("--heldout", args.heldout, ("fold",)), ("--fold-dataset", args.fold_dataset, ("fold",)),
                                  ("--fold-policy", args.fold_policy, ("candidate", "fold")),
                                  ("--full-policy", args.full_policy, ("candidate", "seed")),
                                  ("--out-policy", args.out_policy, ("seed",))):
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


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    check_args(args)
    K, C = range(args.folds), list(args.candidates)
    heldouts, fold_data = [fill(args.heldout, fold=k) for k in K], [fill(args.fold_dataset, fold=k) for k in K]
    fold_pol = {c: [fill(args.fold_policy, candidate=c, fold=k) for k in K] for c in C}
    full_pol = {c: [fill(args.full_policy, candidate=c, seed=s) for s in args.seeds] for c in C}
    out_pol = [fill(args.out_policy, seed=s) for s in args.seeds]
    contract.check_paths({"--dataset": args.dataset, "--heldout": heldouts, "--fold-dataset": fold_data,
                          "--fold-policy": sum(fold_pol.values(), []), "--full-policy": sum(full_pol.values(), [])},
                         files={"--out": args.out, "--out-policy": out_pol})

    # the data: the full dataset and, per fold, the held-out episodes and the training dataset of one cv_split.py run
    data = contract.load_dataset(args.dataset)
    meta, fp = data["metadata"], contract.fingerprint(data)
    held, fold_fps, cv_seed, held_eps = [], [], None, []
    for k in K:
        h = contract.load_dataset(heldouts[k])
        rec = cv_record(heldouts[k], h, "heldout", k, args.folds, fp)
        if not h["expert"].all():
            raise contract.ContractError(f"{heldouts[k]}: holds non-expert rows; a held-out file holds D_E episodes only")
        f = contract.load_dataset(fold_data[k])
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
    torch.set_num_threads(args.threads)
    per_fold: Dict[str, List[float]] = {c: [] for c in C}
    for c in C:
        for k in K:
            art = contract.load_policy(fold_pol[c][k])
            check_policy(fold_pol[c][k], art, c, fold_fps[k], fold_data[k], meta)
            pred = contract.build_policy(art)(held[k]["observations"])
            per_fold[c].append(action_mse(pred, held[k]["actions"], meta["action_low"], meta["action_high"]))
    full_arts = {}
    for c in C:
        for s, path in zip(args.seeds, full_pol[c]):
            art = contract.load_policy(path)
            check_policy(path, art, c, fp, args.dataset, meta)
            if art["seed"] != s:
                raise contract.ContractError(f"{path}: trained with seed {art['seed']}, not {s} (--full-policy, --seeds)")
            full_arts[c, s] = art
    scores = {c: float(np.mean(per_fold[c])) for c in C}
    choice = choose(scores, C)

    # the outputs: the chosen candidate's full-data artifacts, then the record
    for path in out_pol + [args.out]:
        contract.claim(path)  # a second writer to the same output is refused while this run goes on
    for s, path in zip(args.seeds, out_pol):
        src = full_pol[choice][list(args.seeds).index(s)]
        contract.save_policy(path, {**full_arts[choice, s], "method": "sampler_selected", "selected_from": choice,
                                    "selection": args.out, "source_policy": src})
    record = {"rule": RULE, "candidates": C, "folds": args.folds, "cv_seed": cv_seed, "choice": choice,
              "scores": {c: {"per_fold": per_fold[c], "mean": scores[c]} for c in C},
              "heldout_episodes": held_eps, "heldout_rows": [int(len(h["rewards"])) for h in held],
              "inputs": {"dataset": args.dataset, "dataset_fingerprint": fp, "heldout": heldouts,
                         "fold_dataset": fold_data, "fold_dataset_fingerprints": fold_fps, "fold_policy": fold_pol,
                         "full_policy": full_pol, "seeds": list(args.seeds)},
              "out_policies": out_pol}
    contract.save_json(args.out, record)
    width = max(len(c) for c in C + ["candidate"])
    print(f"{'candidate':<{width}}  " + "  ".join(f"fold {k:<4}" for k in K) + "  mean")
    for c in C:
        print(f"{c:<{width}}  " + "  ".join(f"{x:<9.5f}" for x in per_fold[c]) + f"  {scores[c]:.5f}"
              + ("  <- chosen" if c == choice else ""))
    print(f"wrote {args.out} and {len(out_pol)} policies ({out_pol[0]} …): sampler = {choice}")
    return record


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (contract.ContractError, ValueError) as e:
        sys.exit(f"error: {e}")
