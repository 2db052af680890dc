import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """A small valid toy dataset written by collect_data.main (2 classes, 6 episodes each)."""
    import collect_data

    path = str(tmp_path_factory.mktemp("data") / "tiny.npz")
    collect_data.main(collect_data.Args(out=path, n_classes=2, episodes_per_class=6, seed=3))
    return path


@pytest.fixture(scope="session")
def tiny_ivae(tiny_dataset, tmp_path_factory):
    """An iVAE checkpoint fit (briefly) on tiny_dataset."""
    import train_ivae

    out = str(tmp_path_factory.mktemp("ivae"))
    train_ivae.main(train_ivae.Args(dataset=tiny_dataset, out_dir=out, total_steps=100, restarts=1, compare=False,
                                    hidden=16, log_every=100))
    return os.path.join(out, "ivae.pt")
