"""Arrays that may be larger than memory: a dataset stored uncompressed is memory-mapped by the data contract
(contract.is_mapped), and the statistics the stages take of it are computed a block of rows at a time, to the same
bits as numpy's over the whole array."""

from typing import Optional

import numpy as np

from oilca import contract


def _sum_rows(blocks) -> np.ndarray:
    """Σ over axis 0 of the rows of `blocks` in order, the same float32 sum as numpy's over the whole array (a
    reduction over the outer axis of a C-ordered array adds row after row; the running sum leads each block)."""
    total = None
    for b in blocks:
        total = b.sum(0) if total is None else np.concatenate([total[None], b]).sum(0)
    return total


def row_index(rows, n: int) -> Optional[np.ndarray]:
    """Rows given as None (all), a slice, a boolean mask or indices, as None or an index array."""
    if rows is None or (isinstance(rows, slice) and rows == slice(None)):
        return None
    if isinstance(rows, slice):
        return np.arange(n)[rows]
    rows = np.asarray(rows)
    return np.flatnonzero(rows) if rows.dtype == bool else rows


def _in_blocks(x: np.ndarray) -> bool:
    """Read a memory-mapped [N, d >= 2] array block by block; anything else whole (numpy sums one column pairwise,
    which blocks would not reproduce)."""
    return contract.is_mapped(x) and x.ndim == 2 and x.shape[1] >= 2


def mean_std(x: np.ndarray, rows: Optional[np.ndarray] = None, block: int = 1 << 16):
    """x[rows].mean(0), x[rows].std(0) bit for bit, without a copy of x[rows] when x is memory-mapped (a dataset
    larger than memory): read `block` rows at a time. A single column is copied (numpy sums it pairwise)."""
    if not _in_blocks(x):
        x = x if rows is None else x[rows]
        return x.mean(0), x.std(0)
    rows = row_index(rows, len(x))
    n = len(x) if rows is None else len(rows)
    return block_mean_std(n, (lambda i, j: x[i:j]) if rows is None else (lambda i, j: x[rows[i:j]]), block)


def diff_mean_std(x: np.ndarray, y: np.ndarray, block: int = 1 << 16):
    """(y - x).mean(0), (y - x).std(0) bit for bit, without the whole difference in memory when x is memory-mapped
    (e.g. s' - s of a dataset larger than memory)."""
    if not _in_blocks(x):
        d = y - x
        return d.mean(0), d.std(0)
    return block_mean_std(len(x), lambda i, j: y[i:j] - x[i:j], block)


def block_mean_std(n: int, take, block: int = 1 << 16):
    """mean(0), std(0) of the n rows that take(i, j) gives block by block (rows i to j), as numpy gives them for the
    whole [n, d] float32 array with d >= 2, bit for bit."""
    mean = np.true_divide(_sum_rows(take(i, i + block) for i in range(0, n, block)), np.intp(n), casting="unsafe")

    def squares():
        for i in range(0, n, block):
            d = take(i, i + block) - mean
            yield np.multiply(d, d, out=d)

    return mean, np.sqrt(np.true_divide(_sum_rows(squares()), np.intp(n), casting="unsafe"))
