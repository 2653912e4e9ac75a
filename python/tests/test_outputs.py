"""Every file the module writes passes the commands' one output guard
(io/run_files.h CheckRunFiles) before anything is written:
GenerateResult.save as `tpumesh generate -o`, io.write_png,
io.write_datasets, the traces of simulate and stablehlo. And what the
module reads is what it says it is: a regular file, an HDF5 file, a uint8
image."""

import os
import shutil

import numpy as np
import pytest

import tpumesh

PROMPT = "a red circle on a blue background"

MODULE = """module @m {
  func.func public @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""


def one_line(excinfo, *words):
    text = str(excinfo.value)
    assert "\n" not in text, text
    for w in words:
        assert w in text, text


@pytest.fixture(scope="module")
def pipe():
    return tpumesh.Pipeline.default()


@pytest.fixture(scope="module")
def small(pipe):
    return pipe.generate(PROMPT, steps=2, seed=1, mesh="data=1")


def test_save_refuses_a_fifo_or_folder_where_an_image_goes(small, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "image_00.png")
    with pytest.raises(OSError) as e:
        small.save(out)
    one_line(e, "image_00.png", "not a regular file")
    assert sorted(p.name for p in out.iterdir()) == ["image_00.png"]  # nothing written
    assert not (out / "image_00.png").is_file()  # the FIFO is still there
    (out / "image_00.png").unlink()
    (out / "grid.png").mkdir()
    with pytest.raises(OSError) as e:
        small.save(out)
    one_line(e, "grid.png", "a directory")
    (out / "grid.png").rmdir()
    assert len(small.save(out)) == 2  # image_00.png and grid.png


def test_save_refuses_an_image_of_a_larger_set(small, tmp_path):
    # one image: an image_01.png beside it would pass for part of its set
    (tmp_path / "image_01.png").write_bytes(b"stale")
    with pytest.raises(OSError) as e:
        small.save(tmp_path)
    one_line(e, "image_01.png", "an image this run does not replace")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image_01.png"]  # nothing written


def test_save_never_overwrites_the_runs_init_image_or_mask(pipe, small, tmp_path):
    folder = tmp_path / "img"
    small.save(folder)
    init = folder / "image_00.png"
    before = init.read_bytes()
    i2i = pipe.generate("a white square on a blue background", steps=2, mesh="data=1", init_image=str(init))
    with pytest.raises(OSError) as e:
        i2i.save(folder)
    one_line(e, "init_image", "image_00.png", "never overwritten")
    assert init.read_bytes() == before
    other = tmp_path / "other"
    assert len(i2i.save(other)) == 2  # elsewhere it saves
    mask = tmp_path / "m" / "grid.png"
    mask.parent.mkdir()
    shutil.copy(folder / "grid.png", mask)
    inpaint = pipe.generate("a white square on a blue background", steps=2, mesh="data=1",
                            init_image=str(other / "image_00.png"), mask=str(mask))
    with pytest.raises(OSError) as e:
        inpaint.save(mask.parent)
    one_line(e, "mask", "grid.png")
    with pytest.raises(OSError) as e:
        inpaint.save(other)
    one_line(e, "init_image")


def test_save_never_overwrites_the_model(small, tmp_path):
    model = tmp_path / "image_00.png"  # a model file named as an image
    model.write_bytes(tpumesh._tpumesh.default_model_bytes())
    result = tpumesh.Pipeline.from_file(model).generate(PROMPT, steps=2, mesh="data=1")
    with pytest.raises(OSError) as e:
        result.save(tmp_path)
    one_line(e, "model", "never overwritten")
    assert model.read_bytes() == tpumesh._tpumesh.default_model_bytes()


def test_every_writer_refuses_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    rgb = np.zeros((2, 2, 3), np.uint8)
    writers = {
        "write_png": lambda: tpumesh.io.write_png(fifo, rgb),
        "write_datasets": lambda: tpumesh.io.write_datasets(fifo, {"x": np.zeros(2, np.float32)}),
        "write_datasets strings": lambda: tpumesh.io.write_datasets(fifo, {"prompts": ["a", "b"]}),
        "simulate trace": lambda: tpumesh.simulate(arch="tiny", steps=1, trace=fifo),
        "stablehlo trace": lambda: tpumesh.stablehlo.run(MODULE, np.ones(2, np.float32), devices=1, trace=fifo),
        "price trace": lambda: tpumesh.stablehlo.price(MODULE, devices=1, trace=fifo),
    }
    for what, write in writers.items():
        with pytest.raises(OSError) as e:
            write()
        one_line(e, str(fifo))
        assert not fifo.is_file(), what


def test_a_trace_is_never_the_module_or_model_it_prices(tmp_path):
    module = tmp_path / "m.mlir"
    module.write_text(MODULE)
    for price in (lambda: tpumesh.stablehlo.price(str(module), devices=1, trace=module),
                  lambda: tpumesh.stablehlo.run(str(module), np.ones(2, np.float32), devices=1, trace=module)):
        with pytest.raises(OSError) as e:
            price()
        one_line(e, "m.mlir", "never overwritten")
        assert module.read_text() == MODULE
    model = tmp_path / "model.h5"
    model.write_bytes(tpumesh._tpumesh.default_model_bytes())
    with pytest.raises(OSError) as e:
        tpumesh.simulate(model=model, steps=1, trace=model)
    one_line(e, "model.h5", "never overwritten")
    assert model.read_bytes() == tpumesh._tpumesh.default_model_bytes()


def test_write_png_refuses_a_float_image(tmp_path):
    grey = np.full((4, 4, 3), 0.5, np.float32)
    with pytest.raises(TypeError) as e:
        tpumesh.io.write_png(tmp_path / "x.png", grey)  # was written black
    one_line(e, "uint8", "float32", "astype(np.uint8)")
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(TypeError) as e:
        tpumesh.io.encode_png(np.full((4, 4, 3), 300, np.int64))  # was wrapped modulo 256
    one_line(e, "uint8", "int64")
    png = tpumesh.io.encode_png((grey * 255).round().astype(np.uint8))
    assert png.startswith(b"\x89PNG")


def test_load_inputs_of_a_file_that_is_not_hdf5_says_so(tmp_path):
    bad = tmp_path / "inputs.h5"
    bad.write_bytes(b"not hdf5 at all, but long enough to have a header" * 20)
    for load in (tpumesh.stablehlo.load_inputs, tpumesh.stablehlo.load_outputs):
        with pytest.raises(OSError) as e:
            load(bad)  # was []
        one_line(e, str(bad), "not an HDF5 file")
    with pytest.raises(OSError) as e:
        tpumesh.io.has_dataset(bad, "x")  # was False
    one_line(e, "not an HDF5 file")
    good = tmp_path / "good.h5"
    tpumesh.io.write_datasets(good, {"input_0": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(tpumesh.stablehlo.load_inputs(good)[0], np.arange(3, dtype=np.float32))


def test_an_input_that_is_a_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "in.h5"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as e:
        tpumesh.stablehlo.load_inputs(fifo)  # would block in open()
    one_line(e, "not a regular file")
