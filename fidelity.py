"""Counterfactual fidelity on the toy: how close augment.py's rows are to the true counterfactuals, before any
policy is trained on them.

On the toy the structural model is known (toy_env.py): s' = f(s, a, u) with the exogenous u of every collected row
stored in the dataset. An augmented row i (augment.py) pairs the source expert row e = aug_source[i], whose true
exogenous value is u* = exogenous[i], with a D_U partner p = aug_partner[i] = (s~, a~); it holds

    observations[i]      = s~'  ≈ f(s~, a~, u*)       the counterfactual state the iVAE's decoder generated
    actions[i]           = a~'  = π̂_E(s~')            the sampler's label
    next_observations[i] = s~'' ≈ f(s~', a~', u*)     the counterfactual next state

For every augmented row this script measures
    state error       ‖s~' - f(s~, a~, u*)‖₂                    (is the counterfactual state right?)
    next-state error  ‖s~'' - f(s~', a~', u*)‖₂                 (is the decoder right one step further?)
    label error       mean_j |a~'_j - π*(s~')_j|                (is the label the expert's action? π*: the toy's
                                                                 goal-seeking controller, actions in [-1, 1])
and the same for "copy the partner's s'" (no counterfactual: the state is the partner's own next state
next_observations[p], made with the partner's u, not u*; labelled by the same sampler), which is what the iVAE
must beat to add anything. Each augmented dataset given is one row of the table (e.g. augmented with the iVAE and
with the no-c ablation, `train_ivae.py --prior standard`); the copy row is computed from the first one's pairs.
State errors are also given in units of the median step length ‖s' - s‖ of D_U, the scale of one move.

Output: --out (JSON: median, 90th percentile and mean of every error per row set, the step scale, the inputs'
fingerprints), --table (the same as a markdown table) and --figure (the errors' cumulative distributions). Toy
datasets only; CausalWorld and DeepMind Control have no known u.
"""

from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import numpy as np

from oilca import cli
from oilca import contract
import envs
from envs import toy as toy_env
from training.policy import check_dims


@dataclass
class Args:
    augmented: Tuple[str, ...] = ("data/toy_aug_r0.5_s0.npz",)
    """augmented toy datasets (augment.py), one row each; the copy row uses the first one's (expert, partner) pairs"""
    names: Optional[Tuple[str, ...]] = None
    """a name per augmented dataset for the table and figure (not given: the file names)"""
    sampler: Optional[str] = None
    """policy artifact that labels the copy rows (not given: the sampler recorded in the first dataset's metadata)"""
    out: str = "results/toy/fidelity.json"
    """output JSON"""
    table: Optional[str] = "results/toy/fidelity.md"
    """output markdown table (the one docs/toy.md shows); none with --table None"""
    figure: Optional[str] = "results/toy/fidelity.png"
    """output figure (cumulative distributions of the errors); none with --figure None"""


def summary(x: np.ndarray) -> dict:
    return {"median": float(np.median(x)), "p90": float(np.percentile(x, 90)), "mean": float(x.mean()), "n": int(len(x))}


def augmented_rows(path: str) -> Tuple[dict, np.ndarray]:
    """A toy dataset made by augment.py's counterfactual mode, and the indices of its augmented rows."""
    data = envs.load_dataset(path)
    if data["metadata"]["env_id"] != "toy":
        raise ValueError(f"{path}: env '{data['metadata']['env_id']}' has no known structural model; fidelity needs the toy")
    rows = np.flatnonzero(data["augmented"]) if "augmented" in data else np.array([], int)
    if len(rows) == 0:
        raise ValueError(f"{path}: no augmented rows (run augment.py on it first)")
    if (data["aug_partner"][rows] < 0).any():
        raise ValueError(f"{path}: rows without a D_U partner (augment.py --mode reconstruct); fidelity needs the counterfactual mode")
    return data, rows


COPY_ROW = "copy partner s'"  # the row this stage adds: the partner's own next state, labelled by the sampler


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> dict:
    if not args.augmented:
        raise ValueError("--augmented needs at least one dataset")
    contract.check_paths({"--augmented": list(args.augmented), "--sampler": args.sampler},
                         files={"--out": args.out, "--table": args.table, "--figure": args.figure})
    names = list(args.names) if args.names else [p.rsplit("/", 1)[-1].removesuffix(".npz") for p in args.augmented]
    if len(names) != len(args.augmented) or len(set(names)) != len(names):
        raise ValueError(f"--names needs {len(args.augmented)} distinct names, one per --augmented dataset")
    if COPY_ROW in names:
        raise ValueError(f"--names: '{COPY_ROW}' is the name of this table's own copy row; name the dataset otherwise")
    inputs = [augmented_rows(p) for p in args.augmented]
    data0, rows0 = inputs[0]
    env = toy_env.make_env(data0["metadata"])
    for (data, _), path in zip(inputs[1:], args.augmented[1:]):
        if data["metadata"]["env_config"] != data0["metadata"]["env_config"]:
            raise ValueError(f"{path}: another toy env than {args.augmented[0]}")
    unl = ~data0["expert"] & ~data0["augmented"]
    step = float(np.median(np.linalg.norm(data0["next_observations"][unl] - data0["observations"][unl], axis=-1)))

    def errors(data, rows, states, labels, next_states=None):
        """The errors of rows whose state came from (s~, a~) of partner aug_partner[row] and u* = exogenous[row]."""
        partner, u = data["aug_partner"][rows], data["exogenous"][rows]
        true_next = env.transition(data["observations"][partner], data["actions"][partner], u)
        out = {"state_error": np.linalg.norm(states - true_next, axis=-1),
               "label_error": np.abs(labels - env.expert_action(states)).mean(-1)}
        if next_states is not None:
            out["next_state_error"] = np.linalg.norm(next_states - env.transition(states, labels, u), axis=-1)
        return out

    table, dists = [], {}
    for name, path, (data, rows) in zip(names, args.augmented, inputs):
        dists[name] = errors(data, rows, data["observations"][rows], data["actions"][rows], data["next_observations"][rows])
        table.append({"name": name, "dataset": path, "dataset_fingerprint": contract.fingerprint(data),
                      "ivae": data["metadata"].get("augmentation", {}).get("ivae"), "n_rows": int(len(rows))})

    sampler = args.sampler or data0["metadata"].get("augmentation", {}).get("sampler")
    if sampler is None:
        raise ValueError(f"{args.augmented[0]}: no sampler recorded in its metadata; pass --sampler")
    art = contract.load_policy(sampler)
    spec_id = art["env"].get("env_id") if isinstance(art.get("env"), dict) else None
    if spec_id not in (None, "toy"):
        raise ValueError(f"{sampler}: a policy of {spec_id}, not of the toy of {args.augmented[0]}")
    check_dims(sampler, art, envs.env_spec(data0["metadata"]))
    policy = contract.build_policy(art)
    copy_states = data0["next_observations"][data0["aug_partner"][rows0]]
    dists[COPY_ROW] = errors(data0, rows0, copy_states, policy(copy_states).astype(np.float64))
    table.append({"name": COPY_ROW, "dataset": args.augmented[0], "sampler": sampler,
                  "dataset_fingerprint": contract.fingerprint(data0), "n_rows": int(len(rows0))})

    for row in table:
        d = dists[row["name"]]
        row.update({k: summary(v) for k, v in d.items()})
        row["state_error_in_steps"] = summary(d["state_error"] / step)
    result = {"env": "toy", "median_step": step, "rows": table, "args": asdict(args)}
    contract.save_json(args.out, result)

    lines = ["| rows | state error, median / 90th pct. | in median steps of D_U | next-state error | "
             "label error, median / 90th pct. |", "|---|---|---|---|---|"]
    for row in table:
        s, n, lab, nxt = row["state_error"], row["state_error_in_steps"], row["label_error"], row.get("next_state_error")
        lines.append(f"| {row['name'].replace('|', chr(92) + '|')} | {s['median']:.3f} / {s['p90']:.3f} | "
                     f"{n['median']:.2f} / {n['p90']:.2f} | " + (f"{nxt['median']:.3f} / {nxt['p90']:.3f}" if nxt else "–")
                     + f" | {lab['median']:.3f} / {lab['p90']:.3f} |")
    text = "\n".join(lines) + "\n"
    if args.table:
        contract.save_text(args.table, text)
    print(f"median step length of D_U: {step:.3f}, {len(rows0)} augmented rows\n{text}", end="")
    if args.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for name, d in dists.items():
            for ax, key in zip(axes, ("state_error", "label_error")):
                x = np.sort(d[key] / (step if key == "state_error" else 1))
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=name)
        axes[0].set(xlabel="‖s~' - f(s~, a~, u*)‖ / median step of D_U", ylabel="share of rows ≤ x", xscale="log",
                    title="counterfactual state")
        axes[1].set(xlabel="mean |label - expert action| per dim", title="label")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        contract.save_figure(args.figure, fig)
    print(f"wrote {args.out}" + (f" and {args.figure}" if args.figure else ""))
    return result


if __name__ == "__main__":
    cli.run(main, Args)
