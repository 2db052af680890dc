"""Invariants of the toy causal MDP (toy_env.py)."""
import numpy as np
import pytest

from envs.toy import ToyCausalNav, ToyEnvConfig


def batch(env, n=2000, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    s = env.sample_start(n, rng)
    a = rng.uniform(-1, 1, size=(n, 2))
    u = env.sample_u(rng.integers(0, env.n_classes, n), rng) * scale
    return s, a, u


@pytest.mark.parametrize("slope", [0.2, 0.5, 1.0])
def test_transition_is_injective_in_u(slope):
    env = ToyCausalNav(4, ToyEnvConfig(leaky_slope=slope, seed=7))
    s, a, u = batch(env)
    s_next = env.transition(s, a, u)
    np.testing.assert_allclose(env.invert_u(s, a, s_next), u, atol=1e-6)
    # distinct u at the same (s, a) give distinct s'
    s2 = env.transition(s, a, u + 1e-3 * np.random.default_rng(1).normal(size=u.shape))
    assert np.all(np.linalg.norm(s2 - s_next, axis=1) > 0)


def test_jacobian_in_u_is_nonsingular():
    env = ToyCausalNav(4)
    s, a, u = batch(env, n=500)
    eps = 1e-6
    base = env.transition(s, a, u)
    J = np.stack([(env.transition(s, a, u + eps * np.eye(2)[i]) - base) / eps for i in range(2)], -1)
    assert np.all(np.abs(np.linalg.det(J)) > 1e-8)


def test_mixing_is_nonlinear_in_u():
    env = ToyCausalNav(4)
    s, a, u = batch(env, n=4000)
    m = env.mixing(s, a, u)
    X = np.concatenate([u, s, a, np.ones((len(u), 1))], 1)
    resid = m - X @ np.linalg.lstsq(X, m, rcond=None)[0]
    assert (resid ** 2).mean() > 0.01 * (m ** 2).mean()  # a linear map would leave ~0


def test_states_stay_in_box_and_actions_are_clipped():
    env = ToyCausalNav(4)
    s, a, u = batch(env, scale=50.0)  # extreme exogenous draws
    s_next = env.transition(s, a * 10, u)
    B = env.config.box
    assert np.all(np.abs(s_next) < B)
    np.testing.assert_array_equal(env.transition(s, np.full_like(a, 7.0), u), env.transition(s, np.ones_like(a), u))


def test_reward_is_negative_distance_to_target():
    env = ToyCausalNav(4)
    assert env.reward(env.target[None])[0] == 0.0
    p = env.target + np.array([[3.0, 4.0]]) * 0.1
    np.testing.assert_allclose(env.reward(p), [-0.5])
    assert np.all(np.abs(env.target) < env.config.box)


def test_class_distribution_matches_table():
    env = ToyCausalNav(5, ToyEnvConfig(alpha=2.0))
    assert sorted(env.gamma.tolist()) == list(range(5))
    np.testing.assert_allclose(env.u_mean[:, 0], 0)
    np.testing.assert_allclose(env.u_mean[:, 1], 2.0 * (env.gamma - 2))
    assert np.all((env.u_var >= 0.1) & (env.u_var <= 1.0))
    rng = np.random.default_rng(0)
    for c in range(5):
        u = env.sample_u(np.full(40_000, c), rng)
        np.testing.assert_allclose(u.mean(0), env.u_mean[c], atol=0.03)
        np.testing.assert_allclose(u.var(0), env.u_var[c], rtol=0.05)


def test_dynamics_do_not_depend_on_number_of_classes_and_follow_seed():
    s, a, u = batch(ToyCausalNav(4))
    np.testing.assert_array_equal(ToyCausalNav(4).transition(s, a, u), ToyCausalNav(11).transition(s, a, u))
    assert not np.allclose(ToyCausalNav(4, ToyEnvConfig(seed=1)).transition(s, a, u), ToyCausalNav(4).transition(s, a, u))


def test_gym_like_api():
    env = ToyCausalNav(3, ToyEnvConfig(episode_len=7))
    with pytest.raises(RuntimeError):
        env.step(np.zeros(2))
    with pytest.raises(ValueError):
        env.reset(c=3)
    s = env.reset(c=2, seed=5)
    assert s.shape == (2,)
    for t in range(7):
        s_next, r, terminated, truncated, info = env.step(env.expert_action(s))
        assert not terminated and truncated == (t == 6)
        assert info["c"] == 2 and info["u"].shape == (2,)
        np.testing.assert_allclose(env.invert_u(s[None], env.expert_action(s)[None], s_next[None])[0], info["u"], atol=1e-6)
        np.testing.assert_allclose(r, -np.linalg.norm(s_next - env.target))
        s = s_next
    assert np.array_equal(env.reset(c=2, seed=5), ToyCausalNav(3, ToyEnvConfig(episode_len=7)).reset(c=2, seed=5))


def test_expert_control_points_at_target_and_the_twist_matters():
    env = ToyCausalNav(4)
    s, _, _ = batch(env)
    a = env.expert_action(s)
    assert np.all(np.abs(a) <= 1)
    far = np.linalg.norm(env.target - s, axis=1) > 1e-3
    assert np.all(np.sum(env.control(s, a) * (env.target - s), axis=1)[far] > 0)
    # the raw action often points away from the target: a policy must learn the twist field
    assert np.mean(np.sum(a * (env.target - s), axis=1)[far] < 0) > 0.1
    R = env.rotation(s)
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(2), R.shape), atol=1e-12)


def test_expert_beats_a_controller_that_ignores_the_twist():
    env = ToyCausalNav(4)

    def run(policy, n=200):
        rng = np.random.default_rng(0)
        s, c, ret = env.sample_start(n, rng), np.arange(n) % 3, 0.0
        for _ in range(env.config.episode_len):
            s = env.transition(s, policy(s), env.sample_u(c, rng))
            ret += env.reward(s)
        return ret.mean()

    naive = lambda s: np.clip((env.target - s) / env.config.step_size, -1, 1)  # noqa: E731
    random = lambda s: np.random.default_rng(1).uniform(-1, 1, s.shape)  # noqa: E731
    assert run(env.expert_action) > run(naive) + 5 > run(random) + 10


def paper_toy():
    """The recipe of runner.py's toy:paper preset, parsed as collect_data.py parses it."""
    import tyro

    import collect_data
    import runner

    return tyro.cli(collect_data.Args, args=list(runner.PRESETS["toy:paper"]["collect"]))


def u_effect(env, n=4000, seed=0):
    """(median ‖scale·m(u; s, a)‖, median ‖scale·(m(u) - m(u'))‖ for two draws of the same class), in steps."""
    rng = np.random.default_rng(seed)
    s, a, c = env.sample_start(n, rng), rng.uniform(-1, 1, size=(n, 2)), rng.integers(0, env.n_classes, n)
    d1, d2 = (env.config.noise_scale * env.mixing(s, a, env.sample_u(c, rng)) for _ in range(2))
    step = env.config.step_size
    return np.median(np.linalg.norm(d1, axis=1)) / step, np.median(np.linalg.norm(d1 - d2, axis=1)) / step


def test_paper_toy_preset_is_invertible_long_and_u_moves_as_much_as_the_control():
    args = paper_toy()
    cfg = args.toy
    env = ToyCausalNav(cfg.n_classes + cfg.heldout_classes, cfg.env)
    assert cfg.env.episode_len == 500 and cfg.n_classes == 3 and cfg.n_classes * cfg.episodes_per_class == 999
    assert 74 <= args.positive_frac * 999 * args.expert_prob <= 76  # about 75 D_E episodes expected (Appendix C.1)
    s, a, u = batch(env)
    np.testing.assert_allclose(env.invert_u(s, a, env.transition(s, a, u)), u, atol=1e-6)
    total, spread = u_effect(env)
    assert total > 0.7 and spread > 0.5  # u's displacement is comparable to a unit action's step
    assert u_effect(ToyCausalNav(4))[1] < 0.4  # the fast toy's u moves s' by a fraction of a step
    # the goal-seeking expert still holds the target against u in every class, the held-out one included
    rng = np.random.default_rng(0)
    for c in range(env.n_classes):
        s, dist = env.sample_start(20, rng), []
        for _ in range(cfg.env.episode_len):
            s = env.transition(s, env.expert_action(s), env.sample_u(np.full(20, c), rng))
            dist.append(-env.reward(s))
        assert np.mean(dist[100:]) < 0.2, c
