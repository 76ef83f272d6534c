"""Derives `rlx_cpu::kernels::simd::EXP_POLY`, the polynomial of RLX's f32 `exp` (printed; pasted
into simd.rs), and checks the f32 evaluation the kernels run against float64 `numpy.exp`.

The kernels reduce `x` to `r = x - n ln 2` with `n = round(x log2 e)`, so `|r| <= ln 2 / 2`, and
evaluate `exp(r) ~ 1 + r + r^2 Q(r)` by Horner's rule with FMAs, then scale by `2^n`. `Q` has degree
4 (`exp` of degree 6; Cephes `expf`'s has degree 7 for the same accuracy), fitted for the least
maximum relative error on `|r| <= ln 2 / 2` by Lawson's iteratively reweighted least squares. The
coefficients are rounded to f32 and both f32 evaluations are emulated on 4M arguments in [-87, 88]
(results that are normal floats; below, the 2^n scale rounds into the subnormals): the vector
forms' (`math_vec::exp_clamped`: FMAs, each product exact in float64 and the sum rounded to f32,
with a float64 rounding first that changes a result only where it lands on an f32 tie) and the
scalar `exp_f32`'s (`1 + r + r^2 P(r)` with separate f32 multiplies and adds). The maximum errors
are printed in ulps, next to Cephes' polynomial's.

Run: python3 tools/refgen/fit_exp_f32.py (numpy only).
"""

import numpy as np

HALF_LN2 = np.log(2.0) / 2 * 1.0005  # a little wider: `n` is rounded in f32
CEPHES = [1.9875691e-4, 1.3981999e-3, 8.333452e-3, 4.1665796e-2, 1.6666665e-1, 0.5, 1.0, 1.0]


def fit(degree):
    """Coefficients of exp(r) ~ 1 + r + r^2 Q(r), highest degree first, and the fit's max error."""
    r = np.cos(np.linspace(0, np.pi, 4001)) * HALF_LN2
    f = np.exp(r)
    a = np.stack([r ** (k + 2) for k in range(degree - 1)], 1)
    b = f - 1 - r
    w = np.ones_like(r)
    for _ in range(200):
        scale = w / f
        c, *_ = np.linalg.lstsq(a * scale[:, None], b * scale, rcond=None)
        err = np.abs((a @ c - b) / f)
        w = w * err
        w /= w.sum()
    return [float(np.float32(v)) for v in c[::-1]] + [1.0, 1.0], err.max()


def fma(a, b, c):
    """f32 fused multiply-add: the product is exact in float64; the sum is rounded to float64, then
    to f32 (a double rounding, which differs from FMA's single one only on rare f32 ties)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def exp_f32(coeffs, x):
    """The kernels' f32 `exp` (`math_vec::exp_clamped`) on `x` in [-87, 88]."""
    x = x.astype(np.float32)
    magic = np.full_like(x, 12582912.0)
    n = (fma(x, np.float32(np.log2(np.e)), magic) - magic).astype(np.float32)
    r = fma(-n, np.float32(0.6933594), x)
    r = fma(-n, np.float32(-2.1219444e-4), r)
    p = np.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        p = fma(p, r, np.full_like(x, c))
    return (p.astype(np.float64) * np.exp2(n.astype(np.float64))).astype(np.float32)


def exp_f32_scalar(coeffs, x):
    """The scalar `exp_f32` (`simd.rs`) on `x` in [-87, 88]: no FMA, every f32 operation rounded."""
    f = np.float32
    x = x.astype(f)
    t = (x * f(np.log2(np.e))).astype(f) + f(12582912.0)
    n = (t - f(12582912.0)).astype(f)
    r = ((x - (n * f(0.6933594)).astype(f)).astype(f) - (n * f(-2.1219444e-4)).astype(f)).astype(f)
    z = (r * r).astype(f)
    p = np.full_like(x, coeffs[0])
    for c in coeffs[1:-2]:
        p = ((p * r).astype(f) + f(c)).astype(f)
    e = (((p * z).astype(f) + r).astype(f) + f(1.0)).astype(f)
    return (e.astype(np.float64) * np.exp2(n.astype(np.float64))).astype(f)


def max_ulps(form, coeffs, x):
    ref = np.exp(x.astype(np.float64))
    ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(form(coeffs, x).astype(np.float64) - ref) / ulp))


rng = np.random.default_rng(0)
xs = np.concatenate([rng.uniform(-87, 88, 2_000_000), rng.uniform(-1, 1, 1_000_000), rng.uniform(-10, 0, 1_000_000)]).astype(np.float32)
coeffs, err = fit(6)
print("EXP_POLY (highest degree first):", ", ".join(np.format_float_positional(np.float32(c), unique=True) for c in coeffs))
print(f"fit's max relative error on |r| <= ln2/2: {err:.3g}")
for name, form in [("vector (FMA)", exp_f32), ("scalar exp_f32", exp_f32_scalar)]:
    print(
        f"{name}, max error on [-87, 88]: degree 6 {max_ulps(form, coeffs, xs):.3f} ulp, "
        f"Cephes degree 7 {max_ulps(form, CEPHES, xs):.3f} ulp"
    )
