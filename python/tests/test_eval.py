"""tpumesh.eval against `tpumesh eval`: for every component of the tiny models
(the embedded default and a `tpumesh init --arch tiny` file), the same
outputs bit for bit and the same --report JSON (host times aside) for the
same inputs and mesh; errors as Python exceptions with the CLI's message."""

import json
import pathlib
import subprocess

import numpy as np
import pytest

import tpumesh

from conftest import without_host_times

PROMPTS = ["a red circle on a blue background", "a green square on a white background"]


@pytest.fixture(scope="module")
def models(tpumesh_bin, tmp_path_factory):
    """{"default": the embedded model written to a file (the CLI needs one), "tiny": init --arch tiny}."""
    d = tmp_path_factory.mktemp("models")
    default = d / "default.h5"
    default.write_bytes(tpumesh._tpumesh.default_model_bytes())
    tiny = d / "tiny.h5"
    subprocess.run([tpumesh_bin, "init", "--arch", "tiny", "--seed", "3", "-o", str(tiny), "-q"], check=True,
                   capture_output=True)
    return {"default": str(default), "tiny": str(tiny)}


def cli_eval(tpumesh_bin, tmp, model, component, inputs, *args):
    """(output array, report dict or None) of `tpumesh eval` on `inputs` written by tpumesh.io."""
    tmp.mkdir(parents=True, exist_ok=True)
    src, out, rep = tmp / "in.h5", tmp / "out.h5", tmp / "r.json"
    if not isinstance(inputs, (str, pathlib.Path)):
        tpumesh.io.write_datasets(src, inputs)
        inputs = src
    cmd = [tpumesh_bin, "eval", "--model", model, "--component", component, "--input", str(inputs), "--output",
           str(out), *args]
    if component != "tokenizer":
        cmd += ["--report", str(rep)]
    subprocess.run(cmd, check=True, capture_output=True)
    name = tpumesh._eval.OUTPUT[component]
    return tpumesh.io.read_dataset(out, name), (json.loads(rep.read_text()) if component != "tokenizer" else None)


def cli_error(tpumesh_bin, *args):
    """The one line `tpumesh eval` prints for its error (after "tpumesh: error: ")."""
    p = subprocess.run([tpumesh_bin, "eval", *args], capture_output=True, text=True)
    assert p.returncode != 0
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("tpumesh: error: "), line
    return line[len("tpumesh: error: "):]


def check_same(tpumesh_bin, tmp, model_file, model_arg, component, inputs, mesh):
    """tpumesh.eval(model_arg, ...) equals `tpumesh eval --model model_file` on the same mesh; returns the output."""
    flags = ["--mesh", mesh] if mesh else []
    want, want_report = cli_eval(tpumesh_bin, tmp, model_file, component, inputs, *flags)
    got = tpumesh.eval(model_arg, component, inputs, mesh=mesh)
    (name, array), = got.outputs.items()
    assert name == tpumesh._eval.OUTPUT[component]
    assert array.dtype == want.dtype and array.shape == want.shape
    assert array.tobytes() == want.tobytes()  # bit for bit
    assert got.batch == want.shape[0]
    if component == "tokenizer":
        assert got.report is None
    else:
        g, w = without_host_times(got.report), without_host_times(want_report)
        if model_arg is None:  # the CLI names the file it was given, Python the embedded model
            assert json.dumps(g).count(tpumesh._tpumesh.default_model_name) >= 1
            g = json.loads(json.dumps(g).replace(tpumesh._tpumesh.default_model_name, model_file))
        assert g["summary"]["modelled_seconds"] > 0
        assert g == w
        assert got.modelled_seconds == pytest.approx(w["summary"]["modelled_seconds"], rel=1e-12)
    return array


@pytest.mark.parametrize("which", ["default", "tiny"])
def test_every_component_equals_the_cli(which, models, tpumesh_bin, tmp_path):
    """The chain prompts -> ids -> text states; image -> latents; UNet; decoder, each step against the CLI,
    batch 2 over data=2, the text encoder and UNet also with their weights split over model=2."""
    model = models[which]
    arg = None if which == "default" else model
    ids = check_same(tpumesh_bin, tmp_path / "tok", model, arg, "tokenizer", {"prompts": PROMPTS}, None)
    assert ids.dtype == np.int32 and ids.shape == (2, 77)
    # a list of prompts alone is the tokenizer's input too
    np.testing.assert_array_equal(tpumesh.eval(arg, "tokenizer", PROMPTS)["input_ids"], ids)
    states = check_same(tpumesh_bin, tmp_path / "te", model, arg, "text_encoder", {"input_ids": ids}, "data=2")
    split = check_same(tpumesh_bin, tmp_path / "te2", model, arg, "text_encoder", {"input_ids": ids},
                       "data=1,model=2")
    np.testing.assert_allclose(split, states, rtol=0, atol=1e-4 * np.abs(states).max())
    rng = np.random.default_rng(0)
    image = rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
    latents = check_same(tpumesh_bin, tmp_path / "enc", model, arg, "vae_encoder", {"sample": image}, "data=2")
    assert latents.dtype == np.float32 and latents.shape[:2] == (2, 4)
    unet_in = {"sample": latents, "timestep": np.array([999.0, 500.0], np.float32),
               "encoder_hidden_states": states}
    noise = check_same(tpumesh_bin, tmp_path / "unet", model, arg, "unet", unet_in, "data=2,model=2")
    assert noise.shape == latents.shape and np.isfinite(noise).all()
    decoded = check_same(tpumesh_bin, tmp_path / "dec", model, arg, "vae_decoder", {"latents": latents}, "data=2")
    assert decoded.shape == image.shape


def test_a_file_of_inputs_and_the_options(models, tpumesh_bin, tmp_path):
    """inputs as the path of an HDF5 file; precision, a scalar int timestep; trace=True keeps every op."""
    model = models["tiny"]
    rng = np.random.default_rng(1)
    src = tmp_path / "unet_in.h5"
    tpumesh.io.write_datasets(src, {"sample": rng.standard_normal((2, 4, 8, 8), np.float32),
                                    "timestep": np.int64(7),
                                    "encoder_hidden_states": rng.standard_normal((2, 77, 32), np.float32)})
    want, want_report = cli_eval(tpumesh_bin, tmp_path / "cli", model, "unet", src, "--precision", "default",
                                 "--devices", "2")
    got = tpumesh.eval(model, "unet", src, precision="default", devices=2, trace=True)
    assert got["out_sample"].tobytes() == want.tobytes()
    assert without_host_times(got.report) == without_host_times(want_report)
    highest = tpumesh.eval(model, "unet", str(src), devices=2)
    assert highest["out_sample"].tobytes() != want.tobytes()  # bf16 operands differ from f32
    events = got.trace()["traceEvents"]
    assert len(events) > 10
    with pytest.raises(ValueError, match="trace=True"):
        highest.trace()


def test_bad_arguments_carry_the_cli_message(models, tpumesh_bin, tmp_path):
    model = models["tiny"]
    ids = np.ones((3, 77), np.int32)
    src = tmp_path / "ids.h5"
    tpumesh.io.write_datasets(src, {"input_ids": ids})
    out = str(tmp_path / "o.h5")
    common = ["--model", model, "--input", str(src), "--output", out]

    # a batch of 3 over data=2: the CLI's line, the input file named
    msg = cli_error(tpumesh_bin, *common, "--component", "text_encoder", "--mesh", "data=2")
    assert "not divisible" in msg
    with pytest.raises(ValueError) as e:
        tpumesh.eval(model, "text_encoder", src, mesh="data=2")
    assert str(e.value) == msg
    # the same inputs as a dict: the file is called "inputs"
    with pytest.raises(ValueError) as e:
        tpumesh.eval(model, "text_encoder", {"input_ids": ids}, mesh="data=2")
    assert str(e.value) == msg.replace(str(src), "inputs")

    msg = cli_error(tpumesh_bin, *common, "--component", "clip")
    with pytest.raises(ValueError) as e:
        tpumesh.eval(model, "clip", src)
    assert str(e.value) == msg and "unknown component" in msg

    msg = cli_error(tpumesh_bin, *common, "--component", "text_encoder", "--precision", "fp8")
    with pytest.raises(ValueError) as e:
        tpumesh.eval(model, "text_encoder", src, precision="fp8")
    assert str(e.value) == msg

    # a dataset the component does not read: the CLI's missing-dataset line
    msg = cli_error(tpumesh_bin, *common, "--component", "vae_decoder")
    with pytest.raises(FileNotFoundError) as e:
        tpumesh.eval(model, "vae_decoder", src)
    assert str(e.value) == msg and "latents" in msg

    # a wrong shape
    bad = tmp_path / "bad.h5"
    tpumesh.io.write_datasets(bad, {"latents": np.zeros((1, 3, 4, 4), np.float32)})
    msg = cli_error(tpumesh_bin, "--model", model, "--input", str(bad), "--output", out, "--component",
                    "vae_decoder")
    with pytest.raises(ValueError) as e:
        tpumesh.eval(model, "vae_decoder", bad)
    assert str(e.value) == msg and "shape" in msg

    # checked in Python before anything is written
    with pytest.raises(ValueError, match="has no 'latents'"):
        tpumesh.eval(model, "vae_decoder", {"sample": np.zeros((1, 4, 4, 4), np.float32)})
    with pytest.raises(FileNotFoundError):
        tpumesh.eval(str(tmp_path / "missing.h5"), "unet", src)
    with pytest.raises(FileNotFoundError):
        tpumesh.eval(model, "unet", tmp_path / "missing_inputs.h5")
    with pytest.raises(TypeError):
        tpumesh.eval(model, "unet", 3)
    assert not pathlib.Path(out).exists()


@pytest.fixture(scope="module")
def sdxl_model(tpumesh_bin, data_dir, tmp_path_factory):
    """tests/data/tiny-sdxl-b converted by the CLI (its LoRAs are tests/data/lora/sdxl_*)."""
    path = tmp_path_factory.mktemp("sdxl") / "tiny-sdxl-b.h5"
    subprocess.run([tpumesh_bin, "convert", str(data_dir / "tiny-sdxl-b"), "-o", str(path)], check=True,
                   capture_output=True)
    return str(path)


def test_lora_equals_the_cli(sdxl_model, data_dir, tpumesh_bin, tmp_path):
    """lora= fuses the LoRAs as --lora does: the same bits, and not the plain text encoder's."""
    ids = np.full((1, 77), 999, np.int32)
    ids[0, :5] = np.arange(300, 305)
    loras = [str(data_dir / "lora" / "sdxl_kohya.safetensors") + ":1.5",
             str(data_dir / "lora" / "sdxl_peft.safetensors")]
    flags = [a for l in loras for a in ("--lora", l)]
    want, want_report = cli_eval(tpumesh_bin, tmp_path / "cli", sdxl_model, "text_encoder", {"input_ids": ids},
                                 *flags)
    got = tpumesh.eval(sdxl_model, "text_encoder", {"input_ids": ids}, lora=loras)
    assert got["last_hidden_state"].tobytes() == want.tobytes()
    assert without_host_times(got.report) == without_host_times(want_report)
    plain = tpumesh.eval(sdxl_model, "text_encoder", {"input_ids": ids})["last_hidden_state"]
    assert np.abs(plain - want).max() > 1e-3
    one = tpumesh.eval(sdxl_model, "text_encoder", {"input_ids": ids}, lora=loras[0])["last_hidden_state"]
    want_one, _ = cli_eval(tpumesh_bin, tmp_path / "cli1", sdxl_model, "text_encoder", {"input_ids": ids},
                           "--lora", loras[0])
    assert one.tobytes() == want_one.tobytes()
    msg = cli_error(tpumesh_bin, "--model", sdxl_model, "--component", "text_encoder", "--input",
                    str(tmp_path / "cli" / "in.h5"), "--output", str(tmp_path / "o.h5"), "--lora", loras[1] + ":x")
    with pytest.raises(ValueError) as e:
        tpumesh.eval(sdxl_model, "text_encoder", {"input_ids": ids}, lora=loras[1] + ":x")
    assert str(e.value) == msg


def test_temporary_files_are_removed(models, tmp_path, monkeypatch):
    """The inputs, the embedded model's copy and the output go in a private folder, gone after the call,
    whether it succeeded or failed."""
    import tempfile
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    ids = tpumesh.eval(None, "tokenizer", {"prompts": PROMPTS[0]})["input_ids"]  # one str is one prompt
    assert ids.shape == (1, 77)
    assert list(scratch.iterdir()) == []
    with pytest.raises(ValueError):
        tpumesh.eval(models["tiny"], "text_encoder", {"input_ids": np.ones((3, 77), np.int32)}, mesh="data=2")
    assert list(scratch.iterdir()) == []
