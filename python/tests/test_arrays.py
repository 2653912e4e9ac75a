"""Arrays in and out of the module (python/ndarray.h): numpy 1.x and 2.x
alike (the module reads arrays through Python's buffer protocol, not
numpy's C structs, whose layout numpy 2 changed), any byte order (h5py and
many files give big-endian arrays), any layout (views, transposes,
reversals are copied in C order). Runs under every numpy the suite meets:
Debian's 1.24 and the venv's 2.x (scripts/make-venv.sh)."""

import numpy as np
import pytest

import tpumesh


def module(shape, elem):
    t = f"tensor<{shape}x{elem}>" if shape else f"tensor<{elem}>"
    return f"""module @jit_f {{
  func.func public @main(%arg0: {t}) -> ({t}) {{
    %0 = stablehlo.add %arg0, %arg0 : {t}
    return %0 : {t}
  }}
}}
"""


def test_x_plus_x():
    out, _ = tpumesh.stablehlo.run(module(4, "f32"), np.array([1, 2, 3, 4], np.float32))
    assert out[0].dtype == np.float32
    assert out[0].tolist() == [2, 4, 6, 8]


@pytest.mark.parametrize("dtype", ["<f4", ">f4", ">f8", ">f2", "<f2"])
def test_float_inputs_in_either_byte_order(dtype):
    x = np.array([1.5, -2, 3.25, 1e4], dtype)
    out, _ = tpumesh.stablehlo.run(module(4, "f32"), x)
    assert out[0].tolist() == [3, -4, 6.5, 2e4]


@pytest.mark.parametrize("dtype,elem", [("<c8", "complex<f32>"), (">c8", "complex<f32>"),
                                        ("<c16", "complex<f64>"), (">c16", "complex<f64>")])
def test_complex_inputs_and_outputs(dtype, elem):
    x = np.array([1.5 - 2j, 0.25j, -3, 1e4 + 1j], dtype)
    out, _ = tpumesh.stablehlo.run(module(4, elem), x)
    assert out[0].dtype == np.dtype(dtype).newbyteorder("=")
    assert out[0].tolist() == [3 - 4j, 0.5j, -6, 2e4 + 2j]


@pytest.mark.parametrize("dtype", ["<i4", ">i4", ">i8", ">u2", "|i1", "<u8"])
def test_integer_inputs_in_either_byte_order(dtype):
    x = np.array([1, 2, 100, 7], dtype)
    out, _ = tpumesh.stablehlo.run(module(4, "i32"), x)
    assert out[0].dtype == np.int32
    assert out[0].tolist() == [2, 4, 200, 14]


@pytest.mark.parametrize("make", [
    lambda: np.arange(8, dtype=np.float32)[::2],          # strided
    lambda: np.arange(4, dtype=np.float32)[::-1],         # negative stride
    lambda: np.arange(8, dtype=">f4").reshape(2, 4)[1],   # an offset row, big-endian
    lambda: np.arange(8, dtype=np.float64)[1::2],         # strided, converted
], ids=["step2", "reversed", "big-endian-row", "f64-step2"])
def test_non_contiguous_inputs(make):
    x = make()
    assert not x.flags.c_contiguous or x.dtype.byteorder == ">"
    out, _ = tpumesh.stablehlo.run(module(4, "f32"), x)
    assert out[0].tolist() == (2 * x.astype(np.float64)).tolist()


def test_transposed_and_fortran_inputs():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for x in (a.T, np.asfortranarray(a.T), a.T.astype(">f4"), a[:, ::-1].T):
        out, _ = tpumesh.stablehlo.run(module("4x3", "f32"), x)
        np.testing.assert_array_equal(out[0], 2 * np.asarray(x, np.float32))


def test_scalars_bools_and_memoryviews():
    out, _ = tpumesh.stablehlo.run(module("", "f32"), np.float32(2.5))
    assert out[0].shape == () and float(out[0]) == 5
    out, _ = tpumesh.stablehlo.run(module(3, "i1"), np.array([True, False, True]))
    assert out[0].dtype == np.bool_
    out, _ = tpumesh.stablehlo.run(module(4, "f32"), memoryview(np.array([1, 2, 3, 4], np.float32)))
    assert out[0].tolist() == [2, 4, 6, 8]


def test_outputs_are_plain_owned_arrays():
    out, _ = tpumesh.stablehlo.run(module(4, "f32"), np.ones(4, np.float32))
    a = out[0]
    assert a.flags.c_contiguous and a.flags.writeable and a.dtype.isnative
    a[0] = 7  # ours to change


@pytest.mark.parametrize("dtype", ["clongdouble", "object", "datetime64[s]", "U3", "longdouble"])
def test_unsupported_dtypes_are_one_line_errors(dtype):
    x = np.zeros(4, dtype)
    with pytest.raises(ValueError) as e:
        tpumesh.stablehlo.run(module(4, "f32"), x)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"an input of numpy dtype {np.dtype(dtype)}: StableHLO takes bool, integer, float and complex")


@pytest.mark.parametrize("x", [
    np.array([[1.5, 2], [3, 4]], np.float32),
    np.array([1.5, -2, 1e-3], ">f4"),
    np.array([1.5, 2], ">f8"),
    np.array([0.5, 65504], ">f2"),
    np.array([1, -2, 1 << 40], ">i8"),
    np.array([True, False]),
    np.arange(6, dtype=np.int64).reshape(2, 3).T,
    np.arange(10, dtype=">u2")[::3],
], ids=["f32", ">f4", ">f8", ">f2", ">i8", "bool", "transposed", ">u2-step3"])
def test_write_datasets_round_trips(tmp_path, x):
    path = tmp_path / "a.h5"
    tpumesh.io.write_datasets(path, {"a": x})
    got = tpumesh.io.read_dataset(path, "a")
    assert got.dtype == x.dtype.newbyteorder("=") and got.dtype.isnative
    np.testing.assert_array_equal(got, x)


def test_eval_takes_big_endian_and_strided_inputs():
    z = np.random.default_rng(0).standard_normal((2, 4, 4, 4), np.float32)
    want = tpumesh.eval(None, "vae_decoder", {"latents": z})["sample"]
    assert np.abs(want).max() > 0
    for x in (z.astype(">f4"), np.ascontiguousarray(z.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)):
        got = tpumesh.eval(None, "vae_decoder", {"latents": x})["sample"]
        assert got.tobytes() == want.tobytes()


def test_keys_and_images_in_any_layout():
    k = tpumesh.random.key(7)
    want = tpumesh.random.split(k, 3)
    assert want.dtype == np.uint32 and want.shape == (3, 2)
    assert tpumesh.random.split(k.astype(">u4"), 3).tobytes() == want.tobytes()
    assert tpumesh.random.split(np.stack([k, k], 1)[:, 0], 3).tobytes() == want.tobytes()  # strided
    rgb = np.random.default_rng(1).integers(0, 256, (5, 7, 3), np.uint8)
    assert tpumesh.io.encode_png(rgb[::-1]) == tpumesh.io.encode_png(np.ascontiguousarray(rgb[::-1]))
    assert tpumesh.io.encode_png(rgb) != tpumesh.io.encode_png(rgb[::-1])


def test_generate_takes_big_endian_and_strided_latents():
    pipe = tpumesh.Pipeline.default()
    z = np.random.default_rng(2).standard_normal((2, 4, 16, 16), np.float32)
    kw = dict(steps=2, mesh="data=2")
    want = pipe.generate("a red circle on a blue background", latents=z, **kw)
    np.testing.assert_array_equal(want.initial_latents, z)
    for x in (z.astype(">f4"), np.ascontiguousarray(z[::-1])[::-1], z.astype(np.float64)):
        got = pipe.generate("a red circle on a blue background", latents=x, **kw)
        np.testing.assert_array_equal(got.initial_latents, z)
        assert got.images.tobytes() == want.images.tobytes()


def test_no_binding_reads_numpy_structs():
    """Every array goes through python/ndarray.h: pybind11/numpy.h (py::array) reads numpy's C structs with
    the layout of the numpy pybind11 was written for, wrong under numpy 2 with Debian's pybind11 2.10."""
    import pathlib
    src = pathlib.Path(__file__).resolve().parents[1]
    sources = sorted(src.glob("*.cc")) + sorted(src.glob("*.h"))
    assert len(sources) >= 10
    banned = ('#include "pybind11/numpy.h"', "py::array")
    assert [p.name for p in sources if any(b in p.read_text() for b in banned)] == []


@pytest.mark.parametrize("dtype", ["<c8", ">c16"])
def test_complex_datasets_round_trip(tmp_path, dtype):
    # h5py's layout, a compound {r, i} (docs/formats.md), both ways.
    x = np.array([[1 + 2j, -0.5j], [3, -4 - 1e-3j]], dtype)
    path = str(tmp_path / "z.h5")
    tpumesh.io.write_datasets(path, {"z": x})
    y = tpumesh.io.read_dataset(path, "z")
    assert y.dtype == np.dtype(dtype).newbyteorder("=")
    assert y.tolist() == x.tolist()
