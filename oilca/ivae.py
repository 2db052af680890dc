"""The conditional iVAE network of OILCA §4.1 (Eq. 2–3), shared by train_ivae.py (which fits it) and augment.py (which
rebuilds it from the checkpoint to infer u and decode counterfactual next states).

    prior    p(u | c)          = N(μ_p(c), exp λ_p(c))     learned tables over the classes of c (or N(0, I): `prior="standard"`)
    encoder  q(u | s, a, s', c) = N(g(s, a, Δ, c), exp v(s, a, Δ, c))
    decoder  p(s' | s, a, u)    = N(s + f(s, a, u), σ²_dec)  on the normalised Δ = s' - s scale

The network is an ensemble of `members` independent models evaluated in one batched matmul (train_ivae.py's restarts);
a checkpoint holds one member. The ELBO and its training loop live in train_ivae.py.
"""

import numpy as np
import torch
import torch.nn as nn

from oilca import contract, rows


class EnsembleLinear(nn.Module):
    """`members` independent linear layers applied in one batched matmul: [E, B, inp] -> [E, B, out]."""

    def __init__(self, members: int, inp: int, out: int):
        super().__init__()
        bound = 1 / np.sqrt(inp)  # nn.Linear's default initialisation range
        self.weight = nn.Parameter(torch.empty(members, inp, out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, out).uniform_(-bound, bound))

    def forward(self, x):
        return torch.baddbmm(self.bias, x, self.weight)


def mlp(members: int, inp: int, out: int, hidden: int, n_hidden: int) -> nn.Sequential:
    layers, d = [], inp
    for _ in range(n_hidden):
        layers += [EnsembleLinear(members, d, hidden), nn.LeakyReLU(0.1)]
        d = hidden
    layers.append(EnsembleLinear(members, d, out))
    return nn.Sequential(*layers)


class IVAE(nn.Module):
    """Conditional iVAE, as an ensemble of `members` independent models trained side by side (the restarts).
    Public methods take raw (unnormalised) s, a, s' of shape [B, dim] (or [E, B, dim]) and int classes c [B]
    (or [E, B]), and return [E, B, dim]. `member(k)` extracts one model (E = 1), as saved in checkpoints."""

    def __init__(self, obs_dim: int, act_dim: int, n_classes: int, latent_dim: int, hidden: int = 64,
                 n_hidden: int = 2, prior: str = "conditional", prior_mean: bool = True, decoder_var: float = 0.01,
                 encoder_c: bool = True, members: int = 1):
        super().__init__()
        self.config = dict(obs_dim=obs_dim, act_dim=act_dim, n_classes=n_classes, latent_dim=latent_dim,
                           hidden=hidden, n_hidden=n_hidden, prior=prior, prior_mean=prior_mean, decoder_var=decoder_var,
                           encoder_c=encoder_c)
        self.members, self.n_classes, self.latent_dim, self.encoder_c = members, n_classes, latent_dim, encoder_c
        self.encoder = mlp(members, 2 * obs_dim + act_dim + (n_classes if encoder_c else 0), 2 * latent_dim, hidden, n_hidden)
        self.decoder = mlp(members, obs_dim + act_dim + latent_dim, obs_dim, hidden, n_hidden)
        n_prior = n_classes if prior == "conditional" else 1
        self.prior_mean = nn.Parameter(torch.zeros(members, n_prior, latent_dim), requires_grad=(prior == "conditional" and prior_mean))
        self.prior_logvar = nn.Parameter(torch.zeros(members, n_prior, latent_dim), requires_grad=(prior == "conditional"))
        self.register_buffer("decoder_logvar", torch.full((obs_dim,), float(np.log(decoder_var))))
        for name, dim in (("obs", obs_dim), ("act", act_dim), ("delta", obs_dim)):
            self.register_buffer(f"{name}_mean", torch.zeros(dim))
            self.register_buffer(f"{name}_std", torch.ones(dim))

    def set_normalizer(self, obs: np.ndarray, act: np.ndarray, next_obs: np.ndarray) -> None:
        """Mean/std of s, a and s' - s over the rows given (block by block when memory-mapped, the same numbers)."""
        for name, (mean, std) in (("obs", rows.mean_std(obs)), ("act", rows.mean_std(act)),
                                  ("delta", rows.diff_mean_std(obs, next_obs))):
            getattr(self, f"{name}_mean").copy_(torch.as_tensor(mean))
            getattr(self, f"{name}_std").copy_(torch.as_tensor(std + 1e-6))

    def member(self, k: int) -> "IVAE":
        """A single-model IVAE holding member k's weights."""
        single = IVAE(**self.config, members=1).to(self.decoder_logvar.device)
        params = dict(self.named_parameters())  # parameters carry the member dim first; buffers are shared
        single.load_state_dict({name: (v[k:k + 1] if name in params else v) for name, v in self.state_dict().items()})
        return single

    def _expand(self, x):
        return x.expand(self.members, *x.shape) if x.dim() == 2 else x

    def _inputs(self, s, a):
        return self._expand((s - self.obs_mean) / self.obs_std), self._expand((a - self.act_mean) / self.act_std)

    def encode(self, s, a, s_next, c):
        """Posterior q(u | s, a, s', c): returns (mean, logvar) [E, B, d]."""
        sn, an = self._inputs(s, a)
        dn = self._expand((s_next - s - self.delta_mean) / self.delta_std)
        parts = [sn, an, dn]
        if self.encoder_c:
            parts.append(nn.functional.one_hot(self._expand_c(c), self.n_classes).float())
        mean, logvar = self.encoder(torch.cat(parts, -1)).chunk(2, -1)
        return mean, logvar.clamp(-12, 6)

    def _expand_c(self, c):
        return c.expand(self.members, *c.shape) if c.dim() == 1 else c

    def decode_delta(self, s, a, u):
        """Mean of the normalised Δ = (s' - s - mean) / std under p(s' | s, a, u) [E, B, obs_dim]."""
        sn, an = self._inputs(s, a)
        return self.decoder(torch.cat([sn, an, self._expand(u)], -1))

    def decode(self, s, a, u):
        """s' = f(s, a, u): the decoder mean in raw state units (used by counterfactual augmentation)."""
        return s + self.decode_delta(s, a, u) * self.delta_std + self.delta_mean

    def prior(self, c):
        """p(u | c): (mean, logvar) [E, B, d]; the standard prior ignores c."""
        c = self._expand_c(c)
        idx = c if self.prior_mean.shape[1] > 1 else torch.zeros_like(c)
        members = torch.arange(self.members, device=c.device)[:, None]
        return self.prior_mean[members, idx], self.prior_logvar[members, idx]


def load_ivae(path: str, data: dict, dataset_path: str) -> IVAE:
    """The single-model iVAE of a train_ivae.py checkpoint, checked to have been fit on this very dataset."""
    ckpt = contract.load_checkpoint(path, "ivae")
    fp = contract.fingerprint(data)
    if ckpt.get("dataset_fingerprint") != fp:
        raise contract.ContractError(f"{path}: this iVAE was fit on another dataset ({ckpt.get('dataset_path')}, "
                                     f"fingerprint {ckpt.get('dataset_fingerprint')}), not on {dataset_path} ({fp})")
    meta, cfg = data["metadata"], ckpt["config"]
    if not isinstance(cfg, dict) or not all(k in cfg for k in ("obs_dim", "act_dim", "n_classes")):
        raise contract.ContractError(f"{path}: iVAE 'config' lacks obs_dim, act_dim or n_classes")
    if (cfg["obs_dim"], cfg["act_dim"], cfg["n_classes"]) != (meta["obs_dim"], meta["act_dim"], meta["n_classes"]):
        raise contract.ContractError(f"{path}: iVAE dims (obs {cfg['obs_dim']}, act {cfg['act_dim']}, classes "
                                     f"{cfg['n_classes']}) do not match {dataset_path}")
    try:
        model = IVAE(**cfg)
        model.load_state_dict(ckpt["state_dict"])
    except (TypeError, ValueError, RuntimeError, KeyError, AttributeError) as e:
        raise contract.ContractError(f"{path}: the iVAE config and weights do not fit "
                                     f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
    bad = [name for name, t in model.state_dict().items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise contract.ContractError(f"{path}: iVAE weight '{bad[0]}' holds NaN or inf")
    return model.eval()
