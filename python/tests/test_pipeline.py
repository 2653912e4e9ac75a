"""Pipeline.default().generate against `tpumesh generate`: the same PNG
bytes, the same report, for the same prompt, seed and settings; its keys
are tpumesh.random's; errors as Python exceptions."""

import json
import pathlib
import signal
import subprocess
import threading

import numpy as np
import pytest

import tpumesh

from conftest import without_host_times

PROMPT = "a red circle on a blue background"
STEPS = 50  # the CLI default; 8 images take about a second


@pytest.fixture(scope="module")
def pipe():
    return tpumesh.Pipeline.default()


@pytest.fixture(scope="module")
def cli_run(tpumesh_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    subprocess.run([tpumesh_bin, "generate", "-p", PROMPT, "--seed", "7", "--steps", str(STEPS), "-o",
                    str(out / "img"), "--report", str(out / "r.json"), "-q"], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def result(pipe):
    return pipe.generate(PROMPT, steps=STEPS, seed=7)


def test_png_bytes_equal_the_cli(cli_run, result):
    pngs = result.pngs()
    files = sorted(p.name for p in (cli_run / "img").iterdir())
    assert sorted(pngs) == files and len(files) == 9  # 8 images and grid.png
    for name in files:
        assert pngs[name] == (cli_run / "img" / name).read_bytes(), name
    assert result.png(3) == pngs["image_03.png"] and result.grid_png() == pngs["grid.png"]


def test_images_and_report_equal_the_cli(cli_run, result):
    assert result.images.dtype == np.uint8 and result.images.shape == (8, 32, 32, 3)
    want = without_host_times(json.loads((cli_run / "r.json").read_text()))
    got = without_host_times(result.report)
    assert got["summary"]["modelled_seconds"] > 0 and got["summary"]["images"] == 8
    assert got["summary"] == want["summary"]
    assert got == want


def test_initial_latents_are_the_split_keys_draws(result):
    # image i starts from normal(split(key(seed), B)[i], (1, 4, h, w)), partitionable threefry
    keys = tpumesh.random.split(tpumesh.random.key(7), 8)
    lat = result.initial_latents
    assert lat.shape[:2] == (8, 4)
    for i in range(8):
        np.testing.assert_array_equal(lat[i:i + 1], tpumesh.random.normal(keys[i], (1, *lat.shape[1:])))


def test_save_writes_the_same_files(result, tmp_path):
    written = result.save(tmp_path / "out")
    assert len(written) == 9
    for path in written:
        assert pathlib.Path(path).read_bytes() == result.pngs()[pathlib.Path(path).name]


def test_bad_arguments(pipe):
    with pytest.raises(ValueError, match="steps"):
        pipe.generate(PROMPT, steps=0)
    with pytest.raises(ValueError, match="prompt"):
        pipe.generate([PROMPT] * 3, steps=1)  # 3 prompts for 8 images
    with pytest.raises(ValueError, match="seed"):
        pipe.generate(PROMPT, steps=1, seed=-1)
    with pytest.raises(ValueError, match="scheduler"):
        pipe.generate(PROMPT, steps=1, scheduler="nope")
    with pytest.raises(FileNotFoundError):
        tpumesh.Pipeline.from_file("/nonexistent/model.h5")
    with pytest.warns(UserWarning, match="purple"):
        pipe.generate("a purple circle", steps=1, mesh="data=1")


def test_ctrl_c_interrupts_and_the_pipeline_still_works(pipe):
    timer = threading.Timer(0.3, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        pipe.generate(PROMPT, steps=400, seed=1, mesh="data=2")
    timer.join()
    out = pipe.generate(PROMPT, steps=1, seed=1, mesh="data=2")
    assert out.images.shape == (2, 32, 32, 3)


def test_other_python_threads_run_during_generate(pipe):
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.005)

    t = threading.Thread(target=tick)
    t.start()
    ticks.clear()
    pipe.generate(PROMPT, steps=50, seed=2)
    stop.set()
    t.join()
    assert len(ticks) > 10  # the GIL was released while the devices computed


def test_img2img_and_inpainting_equal_the_cli(pipe, cli_run, tpumesh_bin, tmp_path):
    # generate's --init-image / --mask / --strength as keywords: the same PNG bytes.
    init = str(cli_run / "img" / "image_00.png")
    mask = str(pathlib.Path(__file__).resolve().parents[2] / "docs" / "images" / "readme-mask.png")
    for extra, kwargs in ((["--strength", "0.6"], {"strength": 0.6}), (["--mask", mask], {"mask": mask})):
        out = tmp_path / ("inpaint" if "mask" in kwargs else "i2i")
        subprocess.run([tpumesh_bin, "generate", "-p", "a white square on a blue background", "--steps", "10",
                        "--init-image", init, *extra, "-o", str(out), "-q"], check=True, capture_output=True)
        got = pipe.generate("a white square on a blue background", steps=10, init_image=init, **kwargs).pngs()
        for name in sorted(p.name for p in out.iterdir()):
            assert got[name] == (out / name).read_bytes(), name
    with pytest.raises(ValueError, match="strength"):
        pipe.generate(PROMPT, steps=4, init_image=init, strength=1.5)
    with pytest.raises(ValueError, match="--mask needs --init-image"):
        pipe.generate(PROMPT, steps=4, mask=mask)
    with pytest.raises(FileNotFoundError):
        pipe.generate(PROMPT, steps=4, init_image="/nonexistent.png")
    with pytest.raises(TypeError, match="init_image"):
        pipe.generate(PROMPT, steps=4, init_image=3)
