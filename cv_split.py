"""K-fold split of the expert episodes D_E, for choosing OILCA's sampler π̂_E offline (docs/sampler.md).

OILCA labels its counterfactual rows with a sampler policy π̂_E (Alg. 1 line 5), and which policy serves best
(BC on D_E, BC on D_all, DWBC) differs between datasets. select_sampler.py picks it by cross-validation over the
expert episodes, without rollouts; this stage makes one fold of that split:

  * the D_E episodes (rows with expert=True, episodes named by episode_ids) are put in a random order by
    np.random.default_rng(--seed).permutation and dealt to the K = --folds folds round-robin, so fold sizes differ by
    at most one episode and the same seed gives the same split;
  * --out is the input dataset without fold k's D_E episodes (every row of them removed, D_U and the other folds'
    D_E untouched), on which each candidate sampler is trained with its usual trainer;
  * --heldout-out holds exactly the removed episodes, on which select_sampler.py scores the candidates.

Both outputs are datasets of the contract (docs/contract.md; a dataset whose rows are all expert is valid) and
keep every key of the input (exogenous, policy_ids, …) row for row. Episode ids are not renumbered (the contract
asks only that an episode's rows be contiguous), so each row still names its episode in the source. Metadata is the
input's, with `split.n_expert_episodes` (and `split.n_positive_episodes`, where the collection recorded it: D_E
episodes are positives) counted for the file, plus a record `cv_split`: source path and fingerprint, folds, fold,
seed, part ("train" or "heldout"), the held-out episode ids and the D_E episode counts.

Refused, with one line naming the flag or file and nothing written: an augmented dataset (split the raw one: the
counterfactual rows come from all of D_E), --folds < 2 or above the number of D_E episodes, --fold outside
[0, --folds), an output that is the input or the other output. As collect_data.py does, an existing output made
with the same arguments from the same data is kept (checked by loading it); one made otherwise is refused
unless --force. Outputs are written atomically and locked while the stage runs.
"""

import os
from dataclasses import dataclass

import numpy as np

from oilca import checks
from oilca import cli
from oilca import contract
import envs


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset D_all (raw, not augmented)"""
    folds: int = 3
    """number of folds K of the expert episodes, 2 <= K <= |D_E| episodes"""
    fold: int = 0
    """the fold k in [0, K) whose D_E episodes are held out"""
    seed: int = 0
    """seed of the permutation that deals the D_E episodes to folds"""
    out: str = "data/toy_cv3_f0.npz"
    """output: the dataset without fold k's D_E episodes (train the candidates on it)"""
    heldout_out: str = "data/toy_cv3_f0_heldout.npz"
    """output: fold k's D_E episodes alone (score the candidates on it)"""
    force: bool = False
    """overwrite existing outputs even if they were made with the same arguments"""


def assign_folds(expert_episodes: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold index of each D_E episode (same order as `expert_episodes`): a seeded permutation dealt round-robin."""
    order = np.random.default_rng(seed).permutation(len(expert_episodes))
    fold_of = np.empty(len(expert_episodes), np.int64)
    fold_of[order] = np.arange(len(expert_episodes)) % folds
    return fold_of


def heldout_episodes(data: dict, folds: int, fold: int, seed: int) -> np.ndarray:
    """The sorted episode ids of fold `fold`'s D_E episodes."""
    expert_eps = np.unique(data["episode_ids"][data["expert"]])
    return np.sort(expert_eps[assign_folds(expert_eps, folds, seed) == fold])


def part_arrays(raw: dict, rows: np.ndarray, meta: dict, record: dict) -> dict:
    """The input's arrays restricted to `rows` (their own dtypes), with the metadata of this part."""
    arrays = {k: v[rows] for k, v in raw.items() if k != "metadata"}
    ep = arrays["episode_ids"]
    n_exp = len(np.unique(ep[arrays["expert"]]))
    meta = {**meta, "cv_split": {**record, "n_expert_episodes": n_exp}}
    if isinstance(meta.get("split"), dict):
        split = dict(meta["split"])
        removed = record["source_n_expert_episodes"] - n_exp  # D_E episodes of the source not in this part
        if isinstance(split.get("n_expert_episodes"), int):
            split["n_expert_episodes"] = n_exp
        if isinstance(split.get("n_positive_episodes"), int):  # collect_data.py: D_E ⊆ positives
            split["n_positive_episodes"] = n_exp if record["part"] == "heldout" else split["n_positive_episodes"] - removed
        meta["split"] = split
    arrays["metadata"] = contract.dataset_arrays_from_meta(meta)
    return arrays


def kept(path: str, arrays: dict, record: dict) -> bool:
    """An existing output holds these rows (fingerprint) and was split with these arguments from the same data."""
    try:
        old = envs.load_dataset(path)
    except contract.ContractError:
        return False
    old_record = dict(old["metadata"].get("cv_split") or {})
    old_record.pop("source", None)
    new = {k: v for k, v in record.items() if k != "source"}  # the same data under another path is the same split
    fresh = envs.validate_dataset(path, arrays)
    return all(old_record.get(k) == v for k, v in new.items()) and contract.fingerprint(old) == contract.fingerprint(fresh)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.fields(args, folds=checks.Int(2), fold=checks.Int(0), seed=checks.SEED)
    if args.fold >= args.folds:
        raise ValueError(f"--fold {args.fold} must lie in [0, {args.folds}) (--folds {args.folds})")
    contract.check_paths({"--dataset": args.dataset}, files={"--out": args.out, "--heldout-out": args.heldout_out})
    raw, data = envs.load_dataset_raw(args.dataset)
    if "augmented" in data and data["augmented"].any():
        raise ValueError(f"{args.dataset} is augmented: split the raw dataset (its counterfactual rows come from all of D_E)")
    expert_eps = np.unique(data["episode_ids"][data["expert"]])
    if args.folds > len(expert_eps):
        raise ValueError(f"--folds {args.folds} exceeds the {len(expert_eps)} D_E episodes of {args.dataset}: "
                         f"each fold needs at least one")

    held = heldout_episodes(data, args.folds, args.fold, args.seed)
    held_rows = np.isin(data["episode_ids"], held) & data["expert"]
    record = {"source": args.dataset, "source_fingerprint": contract.fingerprint(data), "folds": args.folds,
              "fold": args.fold, "seed": args.seed, "heldout_episodes": held.tolist(),
              "source_n_expert_episodes": int(len(expert_eps))}
    parts = {}
    for path, part, rows in ((args.out, "train", ~held_rows), (args.heldout_out, "heldout", held_rows)):
        rec = {**record, "part": part}
        parts[path] = (part_arrays(raw, rows, data["metadata"], rec), rec)
        envs.validate_dataset(path, parts[path][0])  # never write a file the next stage would refuse

    for path in parts:
        contract.claim(path)  # a second writer to the same output is refused while this run goes on
    existing = [(flag, p) for flag, p in (("--out", args.out), ("--heldout-out", args.heldout_out)) if os.path.exists(p)]
    if existing and not args.force:
        for flag, path in existing:
            if not kept(path, *parts[path]):
                raise ValueError(f"{flag} {path} exists and was made with other arguments or data: pass --force or "
                                 f"another {flag}")
        if len(existing) == len(parts):
            print(f"{args.out} and {args.heldout_out} exist with the same arguments: kept (use --force to rebuild)")
            return {"out": args.out, "heldout_out": args.heldout_out, "heldout_episodes": held.tolist(), "skipped": True}

    with contract.together():  # both written in full, then renamed: a failed write leaves the old ones as they were
        for path, (arrays, _) in parts.items():
            contract.save_npz(path, arrays)
    n_train = int((~held_rows).sum())
    print(f"fold {args.fold}/{args.folds} (seed {args.seed}) of {args.dataset}: held out {len(held)} of "
          f"{len(expert_eps)} D_E episodes (ids {held.tolist()}, {int(held_rows.sum())} rows) -> {args.heldout_out}; "
          f"{n_train} rows left -> {args.out}")
    return {"out": args.out, "heldout_out": args.heldout_out, "heldout_episodes": held.tolist(), "skipped": False,
            "n_heldout_rows": int(held_rows.sum()), "n_train_rows": n_train}


if __name__ == "__main__":
    cli.run(main, Args)
