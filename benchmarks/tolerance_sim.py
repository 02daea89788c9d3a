"""Calibration of the scale-aware floor (compare.SCALE_ULPS), on the CPU in numpy.

For matmuls (K = 64 .. 8192) and column sums (1000 .. 262144 rows) in float32: the oracle's
naive FMA loop against honest reorderings and precision cheats. Per variant: how many elements
break the spec's default bound (atol 1e-5 + rtol 1e-4 x |expected|), and the largest
(|diff| - ulp) / (u x scale) among them: the SCALE_ULPS a variant needs to pass. Honest
variants need at most ~160, cheats at least ~1900 (tf32 inputs), so 512 sits between with a
margin of 3x or more on each side. `python benchmarks/tolerance_sim.py [MN]` (a few minutes).
"""

import sys

import numpy as np

f32 = np.float32
u = 2.0**-24
rng = np.random.default_rng(1)


def fma_acc(acc, a, b):
    return (acc.astype(np.float64) + a.astype(np.float64) * b.astype(np.float64)).astype(f32)


def serial(A, B, order=None, fma=True, acc_dt=f32):
    K = A.shape[1]
    acc = np.zeros((A.shape[0], B.shape[1]), acc_dt)
    ks = range(K) if order is None else order
    for k in ks:
        a = A[:, k : k + 1]
        b = B[k : k + 1, :]
        if acc_dt != f32:
            acc = (acc.astype(np.float64) + (a * b).astype(np.float64)).astype(acc_dt)
        elif fma:
            acc = fma_acc(acc, a, b)
        else:
            acc = (acc + (a * b).astype(f32)).astype(f32)
    return acc.astype(f32)


def accs(A, B, m):
    parts = [serial(A[:, i::m], B[i::m, :]) for i in range(m)]
    while len(parts) > 1:
        parts = [
            (parts[i] + parts[i + 1]).astype(f32) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    return parts[0]


def chunks(A, B, c, perm):
    K = A.shape[1]
    idx = np.array_split(np.arange(K), c)
    parts = [serial(A[:, ix], B[ix, :]) for ix in idx]
    acc = np.zeros_like(parts[0])
    for p in perm:
        acc = (acc + parts[p]).astype(f32)
    return acc


def rnd(x, bits):  # keep `bits` mantissa bits (RN)
    x = np.ascontiguousarray(x, f32)
    b = x.view(np.uint32).astype(np.uint64)
    s = 23 - bits
    r = ((b + (1 << (s - 1)) - 1 + ((b >> s) & 1)) >> s) << s
    return r.astype(np.uint32).view(f32)


def report(name, exp, got, rtol, atol, outbits=24):
    e = exp.astype(np.float64)
    g = got.astype(np.float64)
    err = np.abs(g - e)
    S = np.max(np.abs(e))
    ulp = np.ldexp(1.0, np.frexp(np.maximum(np.abs(e), 2.0**-126))[1] - outbits)
    elem_bad = err > atol + rtol * np.abs(e)
    r = ((err - ulp) / (u * S))[elem_bad]
    need = r.max() if r.size else 0.0
    print(
        f"  {name:28s} elem_bad={elem_bad.sum():6d}  max (err-ulp)/(u*S) among them="
        f"{need:10.1f}  max err/(uS) all={np.max(err) / (u * S):10.1f}",
        flush=True,
    )


def main() -> None:
    m = n = int(sys.argv[1]) if len(sys.argv) > 1 else 96
    for K in [64, 256, 2048, 8192]:
        A = rng.uniform(-1, 1, (m, K)).astype(f32)
        B = rng.uniform(-1, 1, (K, n)).astype(f32)
        exp = serial(A, B)
        print(f"matmul K={K} S={np.abs(exp).max():.3g}")
        for name, got in [
            ("nofma", serial(A, B, fma=False)),
            ("4acc", accs(A, B, 4)),
            ("32lanes tree", accs(A, B, 32)),
            ("16 chunks rnd", chunks(A, B, 16, rng.permutation(16))),
            ("fp64", (A.astype(np.float64) @ B.astype(np.float64)).astype(f32)),
            ("reverse", serial(A, B, order=range(K - 1, -1, -1))),
            ("tf32 in", serial(rnd(A, 10), rnd(B, 10))),
            ("bf16 in", serial(rnd(A, 7), rnd(B, 7))),
            ("drop<1e-2", serial(A, B * 1) if False else None),
            ("fp16 acc", serial(A, B, acc_dt=np.float16)),
        ]:
            if got is None:
                P = A[:, :, None] * B[None, :, :]
                P[np.abs(P) < 1e-2] = 0
                got = P.sum(1, dtype=f32)
            report(name, exp, got, 1e-4, 1e-5)
    for rows, cols, lo in [(1000, 4096, -1), (16384, 1024, -1), (262144, 64, -1), (16384, 1024, 0)]:
        X = rng.uniform(lo, 1, (rows, cols)).astype(f32)
        exp = np.zeros(cols, f32)
        for r in range(rows):
            exp = (exp + X[r]).astype(f32)
        print(f"colsum rows={rows} lo={lo} S={np.abs(exp).max():.3g}")
        for c in [16, 128]:
            idx = np.array_split(np.arange(rows), c)
            parts = []
            for ix in idx:
                a = np.zeros(cols, f32)
                for r in ix:
                    a = (a + X[r]).astype(f32)
                parts.append(a)
            got = np.zeros(cols, f32)
            for p in rng.permutation(c):
                got = (got + parts[p]).astype(f32)
            report(f"{c} chunks atomics", exp, got, 1e-4, 1e-5)
        report("fp64", exp, X.astype(np.float64).sum(0).astype(f32), 1e-4, 1e-5)
        report("pairwise(numpy)", exp, X.sum(0, dtype=f32), 1e-4, 1e-5)
        report("bf16 in", exp, rnd(X, 7).astype(np.float64).sum(0).astype(f32), 1e-4, 1e-5)
        report("tf32 in", exp, rnd(X, 10).astype(np.float64).sum(0).astype(f32), 1e-4, 1e-5)
        h = np.zeros(cols, np.float16)
        for r in range(0, rows):
            h = (h.astype(f32) + X[r]).astype(np.float16)
        report("fp16 acc", exp, h.astype(f32), 1e-4, 1e-5)


if __name__ == "__main__":
    main()
