"""Every public function checks its arguments in the Python layer
(python/tpumesh/_check.py) before the extension sees them: a wrong type is
a one-line TypeError naming the argument and the value (never pybind11's
dump of overloads, never a bool taken as an int or a float truncated), a
value out of range a one-line ValueError."""

import numpy as np
import pytest

import tpumesh
from tpumesh import random

PROMPT = "a red circle on a blue background"


def one_line(excinfo, *words):
    text = str(excinfo.value)
    assert "\n" not in text and "overload" not in text and "incompatible" not in text, text
    for w in words:
        assert w in text, text


@pytest.fixture(scope="module")
def pipe():
    return tpumesh.Pipeline.default()


def test_an_int_past_the_libraries_range_is_a_value_error():
    key = random.key(0)
    with pytest.raises(ValueError) as e:
        random.split(key, num=2**40)
    one_line(e, "num", str(2**40))
    with pytest.raises(ValueError) as e:
        tpumesh.simulate(arch="sd15", steps=2**40)
    one_line(e, "steps", str(2**40))
    with pytest.raises(ValueError) as e:
        tpumesh.devices(mesh={"data": 2**40})
    one_line(e, "mesh", str(2**40))


def test_a_float_for_an_int_is_a_type_error(pipe):
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=2.9)
    one_line(e, "steps", "2.9")
    with pytest.raises(TypeError) as e:
        random.split(random.key(0), 2.0)
    one_line(e, "num", "2.0")
    with pytest.raises(TypeError) as e:
        random.normal(random.key(0), (2, 3.0))
    one_line(e, "shape", "3.0")
    with pytest.raises(TypeError) as e:
        tpumesh.simulate(arch="sd15", batch_per_device=1.5)
    one_line(e, "batch_per_device", "1.5")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, height=32.0)
    one_line(e, "height", "32.0")
    with pytest.raises(TypeError) as e:
        tpumesh.devices(topology=(2.5, 4))
    one_line(e, "topology", "2.5")


def test_a_bool_is_not_an_int(pipe):
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=True)  # ran one step
    one_line(e, "steps", "True")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, seed=False)
    one_line(e, "seed", "False")
    with pytest.raises(TypeError) as e:
        random.split(random.key(0), True)
    one_line(e, "num", "True")
    with pytest.raises(TypeError) as e:
        random.key(True)
    one_line(e, "seed", "True")
    with pytest.raises(TypeError) as e:
        random.fold_in(random.key(0), np.True_)
    one_line(e, "data", "True")
    with pytest.raises(TypeError) as e:
        tpumesh.devices(devices=True)
    one_line(e, "devices", "True")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, mesh="data=1").png(True)  # was image 1
    one_line(e, "i", "True")


def test_prompts_are_a_str_or_a_list_of_str(pipe):
    with pytest.raises(TypeError) as e:
        pipe.generate([1, 2], steps=1)
    one_line(e, "prompts", "1")
    with pytest.raises(TypeError) as e:
        pipe.generate(b"a red circle", steps=1)
    one_line(e, "prompts", "bytes")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, negative_prompts=[None])
    one_line(e, "negative_prompts", "None")
    with pytest.raises(TypeError) as e:
        tpumesh.simulate(arch="sd15", negative_prompts=3)
    one_line(e, "negative_prompts", "3")


def test_strings_and_flags_are_checked(pipe):
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, scheduler=3)
    one_line(e, "scheduler", "3")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, trace="yes")  # was bool("yes")
    one_line(e, "trace", "yes")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, guidance="7.5")
    one_line(e, "guidance", "7.5")
    with pytest.raises(TypeError) as e:
        pipe.generate(PROMPT, steps=1, strength=True)
    one_line(e, "strength", "True")
    with pytest.raises(ValueError) as e:
        pipe.generate(PROMPT, steps=1, prng="threefry")
    one_line(e, "prng", "threefry")
    with pytest.raises(TypeError) as e:
        tpumesh.Pipeline(3)
    one_line(e, "model", "3")
    with pytest.raises(TypeError) as e:
        tpumesh.simulate(arch="sd15", check_hbm="no")
    one_line(e, "check_hbm", "no")
    with pytest.raises(TypeError) as e:
        tpumesh.simulate(arch=15)
    one_line(e, "arch", "15")
    with pytest.raises(TypeError) as e:
        tpumesh.devices(dataflow=1)
    one_line(e, "dataflow", "1")
    with pytest.raises(TypeError) as e:
        random.normal(random.key(0), (2,), impl=True)
    one_line(e, "impl", "True")
    with pytest.raises(TypeError) as e:
        random.uniform(random.key(0), (2,), minval="0")
    one_line(e, "minval", "0")
    with pytest.raises(TypeError) as e:
        tpumesh.stablehlo.price("module {}", xla_generation=0.4)
    one_line(e, "xla_generation", "0.4")
    with pytest.raises(TypeError) as e:
        tpumesh.stablehlo.layout(3)
    one_line(e, "program", "3")
    with pytest.raises(TypeError) as e:
        tpumesh.eval(None, "vae_decoder", {"latents": np.zeros((1, 4, 4, 4), np.float32)}, trace=1)
    one_line(e, "trace", "1")
    with pytest.raises(TypeError) as e:
        tpumesh.io.read_dataset(__file__, 3)
    one_line(e, "name", "3")
