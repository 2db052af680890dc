"""Fit the identifiable conditional VAE of OILCA §4.1 (Eq. 2–4) on D_all, and score how well it recovers u.

Model (all Gaussians diagonal; s, a and Δ = s' - s are normalised with D_all statistics kept in the model):
    prior    p(u | c)        = N(μ_p(c), exp λ_p(c))      learned tables over the classes of c   (Eq. 2)
                               (`--prior standard`: N(0, I), the "vanilla conditional VAE" ablation of Fig. 3c;
                                `--no-prior-mean`: μ_p(c) = 0, only the variance moves with c, as the official iVAE)
    encoder  q(u | s, a, s', c) = N(g(s, a, Δ, c), exp v(s, a, Δ, c))                               (Eq. 3)
    decoder  p(s' | s, a, u)  = N(s + f(s, a, u), σ²_dec)   i.e. s' = f(s, a, u) + ε on the Δ scale
    ELBO     E_q[log p(s' | s, a, u)] - KL(q(u | s, a, s', c) ‖ p(u | c))                          (Eq. 4)
The KL between two diagonal Gaussians is taken in closed form; the reconstruction term uses one sample. The network
itself (`IVAE`, an ensemble of the restarts in one batched matmul) lives in ivae.py, which augment.py rebuilds too.

Identifiability (iVAE Thm 1) needs n·k + 1 distinct values of c: with n = 2 latent dims, 5 classes when the prior
moves mean and variance (k = 2), 3 when it moves the variance only (k = 1). Each fit runs `restarts` times from
different seeds and keeps the restart with the best ELBO on D_all (never the best MCC).

Input:  a dataset `.npz` (docs/contract.md); every transition of D_all (collected rows) is used.
Output (in --out-dir):
    ivae.pt          checkpoint (kind "ivae"): state_dict, config, args, dataset fingerprint, ELBO; loaded by augment.py
    latents.npz      u_mean, u_logvar [N, d] posterior of every row, aux, expert, and exogenous (true u) if known;
                     u_mean_ablation when the ablation is fit too
    metrics.json     ELBO, reconstruction error, KL, per-restart ELBOs, MCC (when the dataset has `exogenous`)
    fig3.png         Fig. 3: true u coloured by c | iVAE posterior | no-c posterior (with --compare)
    progress.csv     step, elbo, log_lik, kl (means over the last --log-every steps, all restarts) of the --prior
                     fit, a row per --log-every steps, written as it goes; progress_<prior>.csv: the --compare fit
    tb/<prior>/      TensorBoard event files of those rows and of the progress lines (with --tensorboard)
    args.json
The results are staged beside --out-dir and moved in together when the fit completes (contract.RunFolder). A re-run
with the same arguments on the same data keeps them, after checking that ivae.pt loads and was fit on this dataset.
Progress: a line at most every ~10 s (step, steps/s, ETA, the last batch's ELBO and KL), besides the --log-every lines.
MCC = mean absolute Pearson correlation between true and inferred latent dims after the best one-to-one
matching (Hungarian), computed on the posterior means, as in the iVAE literature.
"""

import json
import os
import shutil
import tempfile
import time
import zipfile
import warnings
from dataclasses import asdict, dataclass
from typing import Literal, Optional

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from oilca.ivae import IVAE, load_ivae
from oilca.progress import Progress


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset (D_all with the auxiliary label c)"""
    out_dir: str = "runs/ivae"
    """folder for the checkpoint, latents, metrics and figure"""
    seed: int = 0
    """seed of the initialisation and minibatches (restart r uses seed·1000 + r)"""
    prior: Literal["conditional", "standard"] = "conditional"
    """p(u | c) with c-dependent parameters (iVAE), or N(0, I) ignoring c (the ablation)"""
    prior_mean: bool = True
    """the conditional prior moves its mean with c (k = 2); off: only the variance moves (k = 1)"""
    encoder_c: bool = True
    """feed c to the encoder, q(u | s, a, s', c) as in Eq. 3; off: q(u | s, a, s')"""
    compare: bool = True
    """also fit the other prior with the same budget, for Fig. 3 and the MCC comparison"""
    latent_dim: Optional[int] = None
    """dimension of u; default: that of the dataset's true `exogenous`, else obs_dim"""
    hidden: int = 128
    """width of the hidden layers of encoder and decoder"""
    n_hidden: int = 2
    """number of hidden layers of encoder and decoder"""
    decoder_var: float = 0.01
    """fixed decoder variance σ²_dec (on the normalised Δ scale)"""
    lr: float = 1e-3
    """Adam learning rate (cosine-decayed to lr/10)"""
    batch_size: int = 256
    """minibatch size"""
    total_steps: int = 10_000
    """gradient steps per restart"""
    restarts: int = 4
    """independent restarts; the one with the best final ELBO is kept"""
    log_every: int = 2_000
    """print a line and write a progress.csv row (means since the last one) every this many steps"""
    n_plot: int = 3_000
    """points drawn per panel of Fig. 3"""
    tensorboard: bool = False
    """also write TensorBoard event files of the progress rows and lines to <out_dir>/tb/<prior>"""
    threads: Optional[int] = None
    """torch CPU threads (not given: every core this process may use; runner.py passes cores // --jobs)"""
    cuda: bool = False
    """use CUDA when available"""
    force: bool = False
    """re-fit even if --out-dir already holds a fit with the same arguments"""


def gaussian_log_prob(x, mean, logvar):
    """log N(x; mean, diag exp(logvar)), summed over the last dim."""
    return -0.5 * (np.log(2 * np.pi) + logvar + (x - mean) ** 2 / logvar.exp()).sum(-1)


def gaussian_kl(mean_q, logvar_q, mean_p, logvar_p):
    """KL(N(mean_q, exp logvar_q) ‖ N(mean_p, exp logvar_p)) for diagonal Gaussians, summed over the last dim."""
    return 0.5 * (logvar_p - logvar_q + (logvar_q.exp() + (mean_q - mean_p) ** 2) / logvar_p.exp() - 1).sum(-1)


def elbo_terms(model: IVAE, s, a, s_next, c, generator: Optional[torch.Generator] = None):
    """Per-sample (ELBO, log p(s'|s,a,u), KL(q ‖ p(u|c))) with one reparameterised sample u ~ q (Eq. 4)."""
    mean_q, logvar_q = model.encode(s, a, s_next, c)
    eps = torch.randn(mean_q.shape, generator=generator, device=mean_q.device)
    u = mean_q + (0.5 * logvar_q).exp() * eps
    target = (s_next - s - model.delta_mean) / model.delta_std
    log_lik = gaussian_log_prob(target, model.decode_delta(s, a, u), model.decoder_logvar.expand_as(target))
    kl = gaussian_kl(mean_q, logvar_q, *model.prior(c))
    return log_lik - kl, log_lik, kl


def mean_corr_coef(true: np.ndarray, est: np.ndarray):
    """MCC: mean |Pearson correlation| of the best one-to-one matching between true and estimated dims.
    Returns (mcc, matching, signs): est[:, matching[i]] is paired with true[:, i], with correlation sign signs[i]."""
    if true.ndim != 2 or est.ndim != 2 or len(true) != len(est) or true.shape[1] > est.shape[1]:
        raise ValueError(f"MCC needs [N, d] true and [N, d'] estimates with d' >= d, got {true.shape} and {est.shape}")
    d = true.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.corrcoef(true.T, est.T)[:d, d:]
    corr = np.nan_to_num(corr)  # a constant column correlates with nothing
    rows, cols = linear_sum_assignment(-np.abs(corr))
    return float(np.abs(corr[rows, cols]).mean()), cols, np.sign(corr[rows, cols])


@torch.no_grad()
def evaluate_model(model: IVAE, tensors, batch: int = 8192, seed: int = 0) -> dict:
    """Per member: mean ELBO / log-lik / KL over the whole dataset [E]."""
    gen = torch.Generator(device=tensors[0].device).manual_seed(seed)
    sums = np.zeros((3, model.members))
    for i in range(0, len(tensors[0]), batch):
        terms = elbo_terms(model, *(t[i:i + batch] for t in tensors), gen)
        sums += np.stack([t.sum(-1).cpu().numpy() for t in terms])
    n = len(tensors[0])
    return {"elbo": sums[0] / n, "log_lik": sums[1] / n, "kl": sums[2] / n}


@torch.no_grad()
def encode_dataset(model: IVAE, tensors, members: list, batch: int = 8192, spill: Optional[str] = None) -> tuple:
    """Posterior means and log-variances [len(members), N, d] of the given members, written in place batch by batch:
    a CausalWorld dataset has millions of rows and d = obs_dim, so only the members asked for are kept; with `spill`
    (a file name stem: the dataset is larger than memory) they are files, memory-mapped."""
    n, means, logvars = len(tensors[0]), None, None
    for i in range(0, n, batch):
        m, lv = model.encode(*(t[i:i + batch] for t in tensors))
        if means is None:
            shape = (len(members), n, m.shape[-1])
            means, logvars = (np.empty(shape, np.float32) if spill is None else
                              np.lib.format.open_memmap(f"{spill}_{name}.npy", "w+", np.float32, shape)
                              for name in ("mean", "logvar"))
        means[:, i:i + batch], logvars[:, i:i + batch] = m[members].cpu().numpy(), lv[members].cpu().numpy()
    return means, logvars


def shared_tensor(x: np.ndarray, device) -> torch.Tensor:
    """x as a tensor on `device`; on the CPU it shares x's memory, so a memory-mapped dataset (stored uncompressed,
    larger than memory) is read as batches use it, never copied (the tensors are only read)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable")
        return torch.as_tensor(x, device=device)


def fit(args: Args, prior: str, data: dict, tensors, device, csv_name: str = "progress.csv",
        spill: Optional[str] = None) -> dict:
    """Train `restarts` models side by side with the given prior; keep the one with the best final ELBO on D_all.
    Its progress rows go to <out_dir>/<csv_name> (and with --tensorboard to <out_dir>/tb/<prior>)."""
    meta = data["metadata"]
    latent_dim = args.latent_dim or (data["exogenous"].shape[1] if "exogenous" in data else meta["obs_dim"])
    E = args.restarts
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = IVAE(meta["obs_dim"], meta["act_dim"], meta["n_classes"], latent_dim, args.hidden, args.n_hidden,
                 prior, args.prior_mean, args.decoder_var, args.encoder_c, members=E).to(device)
    model.set_normalizer(data["observations"], data["actions"], data["next_observations"])
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.total_steps, eta_min=args.lr / 10)
    n, t0, running = len(tensors[0]), time.time(), []
    prog = Progress(f"{prior}, {E} restarts", args.total_steps, out_dir=args.out_dir, csv_name=csv_name,
                    tensorboard=args.tensorboard, tb_dir=os.path.join(args.out_dir, "tb", prior))
    for step in range(1, args.total_steps + 1):
        idx = torch.as_tensor(rng.integers(0, n, (E, args.batch_size)), device=device)  # own minibatch per member
        elbo, log_lik, kl = elbo_terms(model, *(t[idx] for t in tensors))
        loss = -elbo.mean(1).sum()  # maximise each member's ELBO (Eq. 4); members share no parameter
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running.append(torch.stack([elbo.mean(), log_lik.mean(), kl.mean()]).detach())  # read at the log points only
        if step % args.log_every == 0 or step == args.total_steps:
            e, ll, k = torch.stack(running).cpu().double().numpy().mean(0)
            running, rate = [], step / (time.time() - t0)
            checks.finite_losses({"elbo": float(e), "log_lik": float(ll), "kl": float(k)}, step, f"iVAE ({prior})")
            prog.log({"step": step, "elbo": float(e), "log_lik": float(ll), "kl": float(k)})  # progress.csv, flushed
            print(f"[{prior}, {E} restarts] step {step}/{args.total_steps}  elbo {e:.3f}  log_lik {ll:.3f}  "
                  f"kl {k:.3f}  {rate:.0f} steps/s  eta {(args.total_steps - step) / rate:.0f}s", flush=True)
        prog.update(step, lambda: {"elbo": elbo.mean().item(), "kl": kl.mean().item()})
    prog.close()
    model.eval()
    result = evaluate_model(model, tensors, seed=args.seed)
    best = int(np.argmax(result["elbo"]))  # model selection by ELBO only, never by MCC
    members = list(range(E)) if "exogenous" in data else [best]  # MCC is reported for every restart
    u_mean, u_logvar = encode_dataset(model, tensors, members, spill=spill and os.path.join(spill, prior))
    checks.finite_losses({"elbo": float(result["elbo"][best])}, args.total_steps, f"iVAE ({prior}), best restart")
    history = [{"restart": k, "elbo": float(result["elbo"][k]), "log_lik": float(result["log_lik"][k]),
                "kl": float(result["kl"][k])} for k in range(E)]
    if "exogenous" in data:
        for k in range(E):
            history[k]["mcc"] = mean_corr_coef(data["exogenous"], u_mean[k])[0]
    out = {key: result[key][best] for key in ("elbo", "log_lik", "kl")}
    out.update(u_mean=u_mean[members.index(best)], u_logvar=u_logvar[members.index(best)])
    out.update(model=model.member(best), restart=best, history=history)
    out.update({k: float(out[k]) for k in ("elbo", "log_lik", "kl")})
    if "exogenous" in data:
        out["mcc"] = history[best]["mcc"]
    return out


def draw_fig3(path: str, data: dict, panels: list, n_plot: int, seed: int) -> None:
    """Fig. 3: true u coloured by c, then each posterior mean with its dims reordered and sign-flipped to the true
    dims by the MCC matching (the posterior is identifiable only up to permutation and scaling), so panels compare."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    idx = rng.choice(len(data["aux"]), size=min(n_plot, len(data["aux"])), replace=False)
    c = data["aux"][idx]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
    for ax, (title, z) in zip(np.atleast_1d(axes), panels):
        if "exogenous" in data and title != "true u":
            _, match, signs = mean_corr_coef(data["exogenous"], z)
            z = z[:, match] * signs
        for k in np.unique(c):
            if z.shape[1] == 1:  # a 1-D u (e.g. a 1-D action perturbation): one histogram per class
                ax.hist(z[idx][c == k, 0], bins=40, alpha=0.5, color=f"C{k}", label=f"c={k}")
            else:
                ax.scatter(z[idx][c == k, 0], z[idx][c == k, 1], s=3, alpha=0.5, color=f"C{k}", label=f"c={k}")
        ax.set_title(title, fontsize=10)
        matched = "exogenous" in data and title != "true u"  # posterior dims reordered and sign-flipped to match u
        names = [f"posterior dim matched to u{i + 1}" if matched else f"u{i + 1}" for i in range(2)]
        ax.set_xlabel(names[0]), ax.set_ylabel(names[1] if z.shape[1] > 1 else "rows")
    np.atleast_1d(axes)[0].legend(markerscale=4, fontsize=7)
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)


def kept_fit(args: Args, arg_dict: dict, data: dict) -> Optional[dict]:
    """The metrics of the fit --out-dir already holds, if it is this very fit: metrics.json with these arguments
    and this dataset's fingerprint, and the artifacts themselves intact (ivae.pt loads, was fit on this dataset
    with these arguments; latents.npz has a row per transition). None, with the reason printed, otherwise."""
    metrics_path, ckpt_path = (os.path.join(args.out_dir, f) for f in ("metrics.json", "ivae.pt"))
    if not os.path.exists(metrics_path):
        return None
    try:
        with open(metrics_path) as f:
            old = json.load(f)
        if not (isinstance(old, dict) and old.get("args") == arg_dict
                and old.get("dataset_fingerprint") == contract.fingerprint(data)):
            return None  # another fit: replaced
        load_ivae(ckpt_path, data, args.dataset)
        if contract.load_checkpoint(ckpt_path, "ivae").get("args") != arg_dict:
            raise contract.ContractError(f"{ckpt_path}: fit with other arguments than metrics.json records")
        with np.load(os.path.join(args.out_dir, "latents.npz")) as z:
            if z["u_mean"].shape[0] != len(data["aux"]):
                raise contract.ContractError("latents.npz: not a row per transition")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        print(f"{args.out_dir}: the kept fit is damaged ({str(e).splitlines()[0]}): re-fitting")
        return None
    return old


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, restarts=checks.COUNT, log_every=checks.COUNT, n_plot=checks.COUNT,
                   latent_dim=checks.COUNT, decoder_var=checks.POSITIVE)
    data = envs.load_dataset(args.dataset)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": args.out_dir})
    keep = contract.collected_rows(data)  # a slice (views, no copy) unless the collected rows are scattered
    data = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    arg_dict = {k: v for k, v in asdict(args).items()
                if k not in ("force", "log_every", "threads", "cuda", "tensorboard")}  # those leave the fit unchanged
    old = None if args.force else kept_fit(args, arg_dict, data)
    if old is not None:
        print(f"{args.out_dir} already holds this fit: kept (use --force to re-fit)")
        return old
    run = contract.RunFolder(args.out_dir)  # a fresh --out-dir for the logs; the results are staged beside it
    torch.set_num_threads(args.threads or cli.cpu_cores())
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    tensors = [shared_tensor(data[k], device) for k in ("observations", "actions", "next_observations", "aux")]
    print(f"{args.dataset}: {contract.describe(data)}")

    mapped = contract.is_mapped(data["observations"])  # larger than memory: the posteriors go to files, not memory
    spill = tempfile.mkdtemp(prefix=".ivae-spill-", dir=os.path.dirname(os.path.abspath(run.staging))) if mapped else None
    try:
        return write_fits(args, data, tensors, device, run, arg_dict, spill)
    finally:
        if spill:
            shutil.rmtree(spill, ignore_errors=True)


def write_fits(args: Args, data: dict, tensors, device, run, arg_dict: dict, spill: Optional[str]) -> dict:
    """Fit the prior (and with --compare the other one), then stage and commit the run's outputs."""
    fits = {args.prior: fit(args, args.prior, data, tensors, device, spill=spill)}
    other = "standard" if args.prior == "conditional" else "conditional"
    if args.compare:
        fits[other] = fit(args, other, data, tensors, device, f"progress_{other}.csv", spill=spill)
    main_fit = fits[args.prior]

    fp = contract.fingerprint(data)
    model = main_fit["model"]
    contract.save_torch(os.path.join(run.staging, "ivae.pt"), {
        "kind": "ivae", "config": model.config, "state_dict": {k: v.cpu() for k, v in model.state_dict().items()},
        "args": arg_dict, "dataset_fingerprint": fp, "dataset_path": args.dataset, "elbo": main_fit["elbo"]})
    latents = {"u_mean": main_fit["u_mean"], "u_logvar": main_fit["u_logvar"], "aux": data["aux"],
               "expert": data["expert"], "episode_ids": data["episode_ids"]}
    if "exogenous" in data:
        latents["exogenous"] = data["exogenous"]
    if args.compare:
        latents["u_mean_ablation"] = fits[other]["u_mean"]
    contract.save_npz(os.path.join(run.staging, "latents.npz"), latents, compress=spill is None)

    metrics = {"args": arg_dict, "dataset": args.dataset, "dataset_fingerprint": fp, "n_transitions": len(data["aux"]),
               "n_classes": data["metadata"]["n_classes"]}
    for name, f in fits.items():
        metrics[name] = {k: f[k] for k in ("elbo", "log_lik", "kl", "restart", "history") if k in f}
        if "mcc" in f:
            metrics[name]["mcc"] = f["mcc"]
    if "exogenous" in data:
        panels = [("true u", data["exogenous"])]
        for name in fits:
            label = "iVAE posterior (prior p(u|c))" if name == "conditional" else "no-c posterior (prior N(0,I))"
            panels.append((f"{label}, MCC {fits[name]['mcc']:.2f}", fits[name]["u_mean"]))
        draw_fig3(os.path.join(run.staging, "fig3.png"), data, panels, args.n_plot, args.seed)
    contract.save_json(os.path.join(run.staging, "args.json"), asdict(args))
    contract.save_json(os.path.join(run.staging, "metrics.json"), metrics)
    run.commit()  # ivae.pt, latents.npz, metrics.json, fig3.png and args.json appear in --out-dir together
    summary = "  ".join(f"{name}: elbo {f['elbo']:.3f}" + (f" mcc {f['mcc']:.3f}" if "mcc" in f else "") for name, f in fits.items())
    print(f"wrote {args.out_dir}/ivae.pt, latents.npz, metrics.json{', fig3.png' if 'exogenous' in data else ''}  |  {summary}")
    return metrics


if __name__ == "__main__":
    cli.run(main, Args)
