"""Derives the coefficients of `rlx_cpu::kernels::simd::erf_f32` (printed; pasted into simd.rs).

- |x| < 1: the Maclaurin series erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)),
  n = 0..10 (the first omitted term is below 1.3e-9 at x = 1).
- 1 <= |x| <= 4: erfc(x) = t * exp(-x^2 + P(t)), t = 1 / (1 + x/2), P of degree 7 fitted by
  least squares on a Chebyshev basis to log(erfc(x) / t) + x^2 (math.erfc in float64); the
  fit's relative error on erfc over the interval is printed (below 1e-8).
Beyond 4, erfc(x) < 1.6e-8 and erf rounds to +-1 in f32.
- erfc (AVX-512 `erfc512`): the same form, P of degree 9 fitted on 0.5 <= x <= 10.

Run: python3 tools/refgen/fit_erf_f32.py (numpy only).
"""

import math

import numpy as np

print("series:", [f"{2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)):.9e}" for n in range(11)])
xs = np.linspace(1.0, 4.0, 4000)
t = 1 / (1 + 0.5 * xs)
ref = np.array([math.erfc(x) for x in xs])
y = np.log(ref / t) + xs * xs
c = np.polynomial.chebyshev.Chebyshev.fit(t, y, 7).convert(kind=np.polynomial.Polynomial).coef
print("P(t), ascending:", [f"{v:.9e}" for v in c])
print("max relative error of erfc:", np.max(np.abs(t * np.exp(-xs * xs + np.polyval(c[::-1], t)) - ref) / ref))

# erfc (the vector `erfc` in rlx-cpu's kernels/math_vec.rs): the same form on the wider range
# 0.5 <= x <= 10 (erfc(10) = 2.1e-45, below the smallest f32 subnormal's half), P of degree 9.
xs = np.linspace(0.5, 10.0, 40000)
t = 1 / (1 + 0.5 * xs)
ref = np.array([math.erfc(x) for x in xs])
y = np.log(ref / t) + xs * xs
c = np.polynomial.chebyshev.Chebyshev.fit(t, y, 9).convert(kind=np.polynomial.Polynomial).coef
print("erfc P(t), descending:", [f"{v:.9e}" for v in c[::-1]])
print("max relative error of erfc on [0.5, 10]:", np.max(np.abs(t * np.exp(-xs * xs + np.polyval(c[::-1], t)) - ref) / ref))
