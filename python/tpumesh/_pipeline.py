"""tpumesh.Pipeline (text to image over the emulated mesh) and tpumesh.simulate
(the same flow priced, nothing computed): `tpumesh generate` and `tpumesh
simulate` from Python, with the same checks and the same bits."""

import json
import os
import warnings

import numpy as np

from tpumesh import _check, _tpumesh
from tpumesh._config import config
from tpumesh._mesh import _check_readable, mesh_spec

_INT_MAX = (1 << 31) - 1  # the library's int: larger values are refused here, smaller ones by its checks

_MESH_KEYS = ("chip", "devices", "mesh", "topology", "model_axis_along", "threads_per_device", "dataflow",
              "vmem_mib")


def _pair(name, value):
    """(W, H) or (X, Y) as the commands' "W,H" text."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise TypeError(f"{name} must be 'W,H' or a pair of ints, not {_check._what(value)}")
    a, b = (_check.integer(name, v, 0, _INT_MAX) for v in value)
    return f"{a},{b}"


def _request(steps, guidance, scheduler, scheduler_opts, height, width, batch_per_device, precision,
             negative_prompts, original_size, crops_coords_top_left, target_size, keep_ops):
    if isinstance(scheduler_opts, dict):
        for k in scheduler_opts:
            _check.string("scheduler_opts key", k)
        scheduler_opts = [f"{k}={v}" for k, v in scheduler_opts.items()]
    scheduler_opts = _check.optional_strings("scheduler_opts", scheduler_opts)
    return {
        "steps": _check.integer("steps", steps, 1, _INT_MAX), "guidance": _check.optional_number("guidance", guidance),
        "scheduler": _check.optional_string("scheduler", scheduler),
        "scheduler_opts": scheduler_opts or None,
        "height": _check.optional_integer("height", height, 1, _INT_MAX),
        "width": _check.optional_integer("width", width, 1, _INT_MAX),
        "batch_per_device": _check.integer("batch_per_device", batch_per_device, 1, _INT_MAX),
        "precision": _check.string("precision", precision),
        "negative_prompts": _check.optional_strings("negative_prompts", negative_prompts),
        "original_size": _pair("original_size", original_size),
        "crops_coords_top_left": _pair("crops_coords_top_left", crops_coords_top_left),
        "target_size": _pair("target_size", target_size), "keep_ops": _check.flag("trace", keep_ops),
    }


def _paths(name, value):
    """None, a path, or a list of paths -> a list of str (or None)."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} takes a PNG path or a list of them, not {type(value).__name__}")
    out = []
    for v in value:
        if not isinstance(v, (str, os.PathLike)):
            raise TypeError(f"{name} takes a PNG path or a list of them, not {type(v).__name__}")
        out.append(_check_readable(v))
    return out


def _seed_text(seed):
    return str(_check.integer("seed", seed))  # the range is ParseSeed's (0 to 2**64 - 1)


class GenerateResult:
    """What Pipeline.generate returns.

    images: uint8 [B, H, W, 3] (image i from normal(split(key(seed), B)[i]));
    report: the chip's view as a dict (`--report`'s JSON); pngs(): the PNG
    files `tpumesh generate` writes for the same request, byte for byte;
    save(dir) writes them; also prompts, timesteps, initial_latents,
    modelled_seconds, run_seconds, compile_seconds, compiled.
    """

    def __init__(self, out):
        self._out = out
        self.images = out.images()
        self._report = None
        self._pngs = None
        for name in ("model_name", "prompts", "negative_prompts", "scheduler", "timesteps", "guidance", "seed",
                     "steps", "compiled", "compile_seconds", "run_seconds", "modelled_seconds", "nonfinite_values"):
            setattr(self, name, getattr(out, name))

    @property
    def report(self):
        if self._report is None:
            self._report = json.loads(self._out.report_json())
        return self._report

    @property
    def initial_latents(self):
        """float32 [B, 4, h, w]: the N(0, 1) draw, before init_noise_sigma."""
        return self._out.initial_latents()

    def pngs(self):
        """{"image_00.png": bytes, ..., "grid.png": bytes}."""
        if self._pngs is None:
            self._pngs = self._out.pngs()
        return dict(self._pngs)

    def png(self, i):
        """Image i's PNG bytes (as image_NN.png)."""
        n = len(self.images)
        i = _check.integer("i", i, -n, n - 1)
        self.pngs()
        return self._pngs[:n][i][1]

    def grid_png(self):
        """grid.png's bytes (diffusers' make_image_grid layout)."""
        self.pngs()
        return self._pngs[-1][1]

    def save(self, directory):
        """Writes the PNGs into `directory` (created if missing), all or none, as `tpumesh generate -o`
        does and after the same checks: an image name there that is not a regular file (a FIFO, a
        device, a folder), or one of this run's inputs (its model, init image, mask), is refused with
        OSError and nothing is written. Returns their paths."""
        return self._out.save(_check.path("directory", directory))

    def trace(self):
        """The Chrome trace (Perfetto) as a dict; every op is in it when generate(trace=True)."""
        return json.loads(self._out.trace_json())

    def __repr__(self):
        b, h, w, _ = self.images.shape
        return (f"GenerateResult({b} images {w}x{h}, {self.steps} steps, seed {self.seed}, "
                f"modelled {self.modelled_seconds:.4f} s)")


class Pipeline:
    """A model on the emulated mesh: Pipeline.default() (the embedded shapes model) or
    Pipeline.from_file("sd15.h5") (`tpumesh convert` / `tpumesh init`).

    The model is opened once per mesh it runs on and keeps its plans, as
    jax.jit keeps compiled functions: the first generate of a set of shapes
    builds the plan, later ones reuse it.
    """

    def __init__(self, model=""):
        self._impl = _tpumesh.Pipeline(_check.path("model", model))

    @classmethod
    def default(cls):
        return cls("")

    @classmethod
    def from_file(cls, path):
        return cls(_check_readable(path))

    @property
    def model(self):
        return self._impl.model or "(embedded default)"

    def vocabulary(self, **mesh_kwargs):
        """The words the model was trained on (the default model's grammar); [] when the file has none."""
        return self._impl.vocabulary(mesh_spec(**mesh_kwargs))

    def generate(self, prompts, *, steps=50, seed=0, mesh=None, devices=None, chip="v5e", topology=None,
                 model_axis_along="x", threads_per_device=0, dataflow=None, vmem_mib=None, negative_prompts=None,
                 guidance=None, scheduler=None, scheduler_opts=None, height=None, width=None, batch_per_device=1,
                 precision="default", prng=None, latents=None, original_size=None, crops_coords_top_left=None,
                 target_size=None, init_image=None, mask=None, strength=None, trace=False,
                 warn_unknown_words=True):
        """Text to image over the mesh: `tpumesh generate`'s flow and bits.

        prompts: one string for every image, or one per image (devices x
        batch_per_device). mesh: "data=8" (the default: 8 devices) or
        "data=D,model=M". prng: "partitionable" or "original" (default:
        tpumesh.config). latents: float32 [B, 4, h, w] to start from.
        init_image, mask: img2img and inpainting, as generate's --init-image
        and --mask (a PNG path, or a list of one per image); strength: in
        (0, 1] (default: the pipeline's). trace=True keeps every op for
        result.trace(). The other keywords are generate's flags (docs/cli.md).
        """
        prompts = _check.strings("prompts", prompts)
        if not prompts:
            raise ValueError("generate needs a prompt")
        spec = mesh_spec(chip, devices, mesh, topology, model_axis_along, threads_per_device, dataflow, vmem_mib)
        request = _request(steps, guidance, scheduler, scheduler_opts, height, width, batch_per_device, precision,
                           negative_prompts, original_size, crops_coords_top_left, target_size, trace)
        request["init_images"] = _paths("init_image", init_image)
        request["masks"] = _paths("mask", mask)
        request["strength"] = _check.optional_number("strength", strength)
        prng = _check.optional_string("prng", prng, ("partitionable", "original"))
        if latents is not None and not isinstance(latents, np.ndarray) and not hasattr(latents, "__array__"):
            raise TypeError(f"latents must be a float32 array [B, 4, h, w], not {_check._what(latents)}")
        if _check.flag("warn_unknown_words", warn_unknown_words):
            self._warn_unknown(spec, prompts + list(request["negative_prompts"] or []))
        out = self._impl.generate(spec, prompts, request, _seed_text(seed), prng or config.prng_impl(), latents)
        return GenerateResult(out)

    def _warn_unknown(self, spec, texts):
        vocabulary = self._impl.vocabulary(spec)
        if not vocabulary:
            return
        unknown = []
        for text in texts:
            for w in _tpumesh.unknown_words(text, vocabulary):
                if w not in unknown:
                    unknown.append(w)
        if unknown:
            quoted = ", ".join(f"'{w}'" for w in unknown)
            warnings.warn(f"{quoted} not in the model's vocabulary; it was trained on: {' '.join(vocabulary)}",
                          stacklevel=3)

    def __repr__(self):
        return f"Pipeline({self.model})"


def _simulate_args(arch, model, kwargs):
    if (arch is None) == (model is None):
        raise ValueError("simulate prices a model: give arch= (sd15, sd21, sdxl, tiny) or model= (a model file)")
    arch = _check.optional_string("arch", arch)
    if model is not None:
        model = _check_readable(model)
    mesh_kwargs = {k: kwargs.pop(k) for k in _MESH_KEYS if k in kwargs}
    request_keys = ("steps", "guidance", "scheduler", "scheduler_opts", "height", "width", "batch_per_device",
                    "precision", "negative_prompts", "original_size", "crops_coords_top_left", "target_size")
    unknown = sorted(set(kwargs) - set(request_keys))
    if unknown:
        raise TypeError(f"simulate got unexpected keyword argument(s) {', '.join(unknown)}")
    defaults = {"steps": 50, "batch_per_device": 1, "precision": "default"}
    req = {k: kwargs.get(k, defaults.get(k)) for k in request_keys}
    return mesh_spec(**mesh_kwargs), arch or "", model or "", req


def simulate(arch=None, model=None, *, trace=None, check_hbm=True, **kwargs):
    """`tpumesh simulate`: a whole generation priced on the emulated chip, nothing computed.

    simulate(arch="sd15", chip="v5e", mesh="data=2,model=4", steps=50) ->
    the report as a dict (`--report`'s JSON: "summary", "devices",
    "sharding_plan"). Device keywords as tpumesh.devices; request keywords
    as Pipeline.generate (steps, guidance, scheduler, height, width,
    batch_per_device, precision, ...). trace="t.json" also writes the
    Chrome trace there. check_hbm=False prices a run that does not fit.
    """
    trace = _check.optional_path("trace", trace)
    spec, arch, model, req = _simulate_args(arch, model, dict(kwargs))
    req = _request(keep_ops=trace is not None, **req)
    inputs = [("model", model), ("chip", spec.chip if os.path.exists(spec.chip) else "")]
    if trace is not None:
        _tpumesh.check_output(trace, inputs)  # before the run, as the command checks
    report_json, trace_json = _tpumesh.simulate(spec, arch, model, req, _check.flag("check_hbm", check_hbm))
    if trace is not None:
        _tpumesh.write_file(trace, trace_json.encode(), inputs)
    return json.loads(report_json)


def sweep_mesh(arch=None, model=None, **kwargs):
    """`tpumesh simulate --sweep-mesh --json`: one dict per data x model factorisation of the devices."""
    if "mesh" in kwargs:
        raise ValueError("sweep_mesh tries every mesh: give devices=, not mesh=")
    spec, arch, model, req = _simulate_args(arch, model, dict(kwargs))
    return _tpumesh.sweep_mesh(spec, arch, model, _request(keep_ops=False, **req))
