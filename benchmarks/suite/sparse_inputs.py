"""Structured inputs for the sparse suite kernels (the test spec's `inputs` hook).

Each function has the hook's signature, `fn(sizes, rng) -> {arg name: array}`, and builds a
valid random sparse matrix of exactly the sizes the spec names: CSR with sorted, unique column
indices per row (rows may be empty), or ELL in column-major order padded with column -1 and
value 0. Arrays not returned here (the dense vector / matrix) come from the spec's `init`.
Vectorised so that the timed cases (millions of non-zeros) take well under a second.
"""

from __future__ import annotations

import numpy as np


def _row_counts(rows: int, cols: int, nnz: int, rng: np.random.Generator) -> np.ndarray:
    """Non-zeros per row: random, summing to nnz, none above cols."""
    if nnz > rows * cols:
        raise ValueError(f"nnz={nnz} does not fit a {rows} x {cols} matrix")
    counts = rng.multinomial(nnz, np.full(rows, 1.0 / rows))
    while (counts > cols).any():  # rare: only matrices that are nearly dense
        counts = np.minimum(counts, cols)
        room = (cols - counts).astype(np.float64)
        counts += rng.multinomial(nnz - int(counts.sum()), room / room.sum())
    return counts.astype(np.int64)


def _sorted_columns(counts: np.ndarray, cols: int, rng: np.random.Generator) -> np.ndarray:
    """For a row with c entries, entry j takes a random column in [j*cols/c, (j+1)*cols/c):
    sorted and unique within the row by construction."""
    c = np.repeat(counts, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    j = np.arange(int(counts.sum()), dtype=np.int64) - starts
    lo = j * cols // np.maximum(c, 1)
    hi = (j + 1) * cols // np.maximum(c, 1)
    return (lo + (rng.random(j.size) * (hi - lo)).astype(np.int64)).astype(np.int32)


def _csr(rows: int, cols: int, nnz: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    counts = _row_counts(rows, cols, nnz, rng)
    row_ptr = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(counts, out=row_ptr[1:])
    col_idx = _sorted_columns(counts, cols, rng)
    vals = rng.uniform(-1.0, 1.0, size=nnz).astype(np.float32)
    return {"row_ptr": row_ptr, "col_idx": col_idx, "vals": vals}


def spmv_csr(sizes: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """CSR matrix `rows x cols` with `nnz` entries for spmv_csr_f32."""
    return _csr(sizes["rows"], sizes["cols"], sizes["nnz"], rng)


def spmm_csr(sizes: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """CSR matrix `rows x k` with `nnz` entries for spmm_csr_f32 (B is k x n, dense)."""
    return _csr(sizes["rows"], sizes["k"], sizes["nnz"], rng)


def spmv_ell(sizes: dict[str, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """ELL matrix `rows x cols` with `width` slots per row, column-major (slot k of row r at
    k * rows + r); each row fills a random number of slots, the rest are padding (-1, 0.0)."""
    rows, cols, width = sizes["rows"], sizes["cols"], sizes["width"]
    if width > cols:
        raise ValueError(f"width={width} exceeds cols={cols}")
    used = rng.integers(0, width + 1, size=rows).astype(np.int64)
    col_flat = _sorted_columns(used, cols, rng)
    slot = np.arange(width)[None, :]
    valid = slot < used[:, None]
    col_idx = np.full((rows, width), -1, dtype=np.int32)
    col_idx[valid] = col_flat  # row-major fill of the valid slots matches the flat order
    vals = np.zeros((rows, width), dtype=np.float32)
    vals[valid] = rng.uniform(-1.0, 1.0, size=col_flat.size).astype(np.float32)
    return {
        "col_idx": np.ascontiguousarray(col_idx.T).ravel(),
        "vals": np.ascontiguousarray(vals.T).ravel(),
    }
