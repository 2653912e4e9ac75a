#!/usr/bin/env python3
"""Writes tests/data/jax_fft_trsm_ref.h5: JAX's (XLA:CPU's) own results of
lax.fft and lax.linalg.triangular_solve in f32 / complex64, for
tests/kernels/jax_parity_test.cc (kernels/fft.h and kernels/triangular_solve.h
must agree with them within 1e-5 relative).

Offline tool (not used by the build or the tests). Run with jax, numpy and
h5py:
  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install "jax[cpu]" h5py
  /tmp/venv/bin/python scripts/refdata/make_fft_trsm_ref.py tests/data/jax_fft_trsm_ref.h5

Layout (complex arrays are float32 with a trailing dim of 2, (re, im), as
the kernels' interleaved buffers):
  fft/<i>/meta  int64 [type (0 FFT, 1 IFFT, 2 RFFT, 3 IRFFT), batch, rank,
                n0, n1, n2] (unused lengths 0)
  fft/<i>/in, fft/<i>/out   the operand and JAX's result, [batch, dims...]
  ts/<i>/meta   int64 [complex (0 f32, 1 c64), left_side, lower,
                unit_diagonal, transpose_a (0 NO_TRANSPOSE, 1 TRANSPOSE,
                2 ADJOINT), batch, m, n]
  ts/<i>/a, ts/<i>/b, ts/<i>/x   a (1e3 in the triangle it must not read),
                b and JAX's x
and the root attributes jax_version, jaxlib_version. IRFFT operands are
random complex, so the imaginary parts of the DC / Nyquist bins are not
zero: they test that the kernels ignore them exactly as XLA:CPU (DUCC)
does, in 1-D and in 2-D / 3-D.
"""
import sys

import h5py
import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax import lax

FFT_TYPES = [lax.FftType.FFT, lax.FftType.IFFT, lax.FftType.RFFT,
             lax.FftType.IRFFT]
FFT_SHAPES = [[n] for n in (1, 2, 3, 5, 8, 12, 17, 31, 97, 100, 1000, 1024,
                            4097)] + [[3, 5], [4, 7], [17, 4], [8, 16],
                                      [2, 3, 5], [2, 17, 9]]


def interleave(x):
    x = np.ascontiguousarray(x)
    if np.iscomplexobj(x):
        return np.stack([x.real, x.imag], axis=-1).astype(np.float32)
    return x.astype(np.float32)


def main(path):
    rng = np.random.default_rng(40)
    with h5py.File(path, "w") as f:
        f.attrs["jax_version"] = jax.__version__
        f.attrs["jaxlib_version"] = jaxlib.__version__
        i = 0
        for fl in FFT_SHAPES:
            for t, fft_type in enumerate(FFT_TYPES):
                batch = 1 if fl[0] >= 1000 else 2
                dims = list(fl)
                if t == 3:
                    dims[-1] = fl[-1] // 2 + 1
                shape = [batch] + dims
                if t == 2:
                    x = rng.uniform(-1, 1, shape).astype(np.float32)
                else:
                    x = (rng.uniform(-1, 1, shape) +
                         1j * rng.uniform(-1, 1, shape)).astype(np.complex64)
                y = np.asarray(lax.fft(jnp.asarray(x), fft_type, tuple(fl)))
                g = f.create_group(f"fft/{i}")
                g["meta"] = np.array([t, batch, len(fl)] + fl + [0] * (3 - len(fl)),
                                     dtype=np.int64)
                g["in"] = interleave(x)
                g["out"] = interleave(y)
                i += 1
        j = 0
        for is_complex in (0, 1):
            dtype = np.complex64 if is_complex else np.float32
            for left in (1, 0):
                for lower in (1, 0):
                    for unit in (0, 1):
                        for tr in (0, 1, 2):
                            batch, m, n = 2, 9, 6
                            k = m if left else n

                            def rand(shape):
                                v = rng.uniform(-1, 1, shape)
                                if is_complex:
                                    v = v + 1j * rng.uniform(-1, 1, shape)
                                return v

                            a = rand([batch, k, k]) / k
                            for e in range(batch):
                                np.fill_diagonal(
                                    a[e], np.sign(rng.uniform(-1, 1, k)) *
                                    (1 + rng.uniform(0, 1, k)))
                            other = (np.triu(np.ones((k, k)), 1) if lower else
                                     np.tril(np.ones((k, k)), -1))
                            a = (a + 1e3 * other).astype(dtype)
                            b = rand([batch, m, n]).astype(dtype)
                            x = np.asarray(lax.linalg.triangular_solve(
                                jnp.asarray(a), jnp.asarray(b),
                                left_side=bool(left), lower=bool(lower),
                                transpose_a=tr != 0, conjugate_a=tr == 2,
                                unit_diagonal=bool(unit)))
                            g = f.create_group(f"ts/{j}")
                            g["meta"] = np.array(
                                [is_complex, left, lower, unit, tr, batch, m, n],
                                dtype=np.int64)
                            g["a"] = interleave(a)
                            g["b"] = interleave(b)
                            g["x"] = interleave(x)
                            j += 1
    print(f"{path}: {i} fft cases, {j} triangular_solve cases, jax "
          f"{jax.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
