"""Rebuild the MCC table (iVAE vs no-c ablation, mean ± std over seeds per number of classes C) from the
metrics.json files that train_ivae.py writes. Usage: python scripts/mcc_table.py runs/mcc [> table.md]"""
import glob
import json
import os
import sys
from collections import defaultdict

import numpy as np


def main(folder: str) -> str:
    rows = defaultdict(lambda: defaultdict(dict))
    for path in sorted(glob.glob(os.path.join(folder, "*", "metrics.json"))):
        m = json.load(open(path))
        for prior in ("conditional", "standard"):
            if prior in m and "mcc" in m[prior]:
                rows[m["n_classes"]][prior][m["args"]["seed"]] = m[prior]["mcc"]
    if not rows:
        raise SystemExit(f"error: no metrics.json with an MCC under {folder}")
    lines = ["| C | iVAE p(u\\|c) MCC | no-c ablation MCC | seeds | per seed (iVAE / ablation) |", "|---|---|---|---|---|"]
    for C in sorted(rows):
        cond, std = rows[C]["conditional"], rows[C]["standard"]
        seeds = sorted(cond)
        a, b = np.array([cond[s] for s in seeds]), np.array([std.get(s, np.nan) for s in seeds])
        per = ", ".join(f"{cond[s]:.2f}/{std.get(s, np.nan):.2f}" for s in seeds)
        lines.append(f"| {C} | {a.mean():.3f} ± {a.std():.3f} | {np.nanmean(b):.3f} ± {np.nanstd(b):.3f} | "
                     f"{','.join(map(str, seeds))} | {per} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "runs/mcc"))
