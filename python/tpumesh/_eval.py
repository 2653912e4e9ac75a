"""tpumesh.eval: one component of a model on inputs over the emulated mesh,
`tpumesh eval` from Python with the same checks and the same bits.

The inputs are written to an HDF5 file in a private temporary folder (or a
file of the user's is read as it is), the command's run (pipeline/eval.h
RunEval) reads it, and its output file is read back; the folder is removed
whatever happens.
"""

import json
import os
import tempfile

from tpumesh import _check, _tpumesh
from tpumesh._mesh import _check_readable, mesh_spec
from tpumesh.io import write_datasets

# The datasets each component reads from its input file (docs/cli.md, eval).
INPUTS = {
    "tokenizer": ("prompts",),
    "text_encoder": ("input_ids",),
    "unet": ("sample", "timestep", "encoder_hidden_states"),
    "vae_decoder": ("latents",),
    "vae_encoder": ("sample",),
}

# The dataset each component writes (pipeline/eval.h).
OUTPUT = {"tokenizer": "input_ids", "text_encoder": "last_hidden_state", "unet": "out_sample",
          "vae_decoder": "sample", "vae_encoder": "latent_mean"}


class EvalResult:
    """What tpumesh.eval returns.

    outputs: {name: numpy array} as `tpumesh eval --output` writes them
    (tokenizer: input_ids int32 [B, 77]; text_encoder: last_hidden_state;
    unet: out_sample; vae_decoder: sample; vae_encoder: latent_mean);
    result[name] is outputs[name]. report: `--report`'s JSON as a dict (None
    for the tokenizer, host work the CLI reports nothing for); trace(): the
    Chrome trace as a dict (eval(trace=True)); batch, host_seconds,
    total_seconds, modelled_seconds as the command prints them.
    """

    def __init__(self, component, name, array, report_json, trace_json, batch, host_seconds, total_seconds,
                 modelled_seconds):
        self.component = component
        self.outputs = {name: array}
        self.report = json.loads(report_json) if report_json else None
        self._trace = trace_json
        self.batch = batch
        self.host_seconds = host_seconds
        self.total_seconds = total_seconds
        self.modelled_seconds = modelled_seconds

    def __getitem__(self, name):
        return self.outputs[name]

    def trace(self):
        if not self._trace:
            raise ValueError("no trace: call tpumesh.eval(..., trace=True) for one")
        return json.loads(self._trace)

    def __repr__(self):
        (name, a), = self.outputs.items()
        return (f"EvalResult({self.component}: {name} {a.dtype}{list(a.shape)}, "
                f"modelled {self.modelled_seconds:.6f} s)")


def write_inputs(path, component, inputs):
    """Writes `inputs` ({dataset: array or list of str}) to a new HDF5 file at
    `path`, as `tpumesh eval --input` reads them."""
    if isinstance(inputs, (list, tuple)) and component == "tokenizer":
        inputs = {"prompts": inputs}
    if isinstance(inputs, dict) and isinstance(inputs.get("prompts"), str):
        inputs = {**inputs, "prompts": [inputs["prompts"]]}
    if not isinstance(inputs, dict):
        raise TypeError(f"inputs must be a dict of arrays, a list of prompts (tokenizer) or an HDF5 file's path, "
                        f"not {type(inputs).__name__}")
    if component in INPUTS:
        takes = INPUTS[component]
        unknown = [k for k in inputs if k not in takes]
        missing = [k for k in takes if k not in inputs]
        if unknown or missing:
            what = f"has no {', '.join(repr(k) for k in missing)}" if missing else \
                f"has {', '.join(repr(k) for k in unknown)}"
            raise ValueError(f"inputs {what}: {component} takes {', '.join(takes)}")
    write_datasets(path, inputs)


def eval(model, component, inputs, *, mesh=None, devices=None, chip="v5e", topology=None, model_axis_along="x",
         threads_per_device=0, dataflow=None, vmem_mib=None, precision="highest", lora=None, trace=False):
    """`tpumesh eval`: one component of a model on a batch over the mesh.

    model: a model file (`tpumesh convert` / `tpumesh init`), or None for the
    embedded default. component: tokenizer, text_encoder, unet,
    vae_decoder or vae_encoder. inputs: {dataset name: numpy array} with the
    names `--input`'s file has (text_encoder: input_ids; unet: sample,
    timestep, encoder_hidden_states; vae_decoder: latents; vae_encoder:
    sample), a list of prompts for the tokenizer, or the path of such an
    HDF5 file. The batch is split over the mesh's data axis and the weights
    over its model axis (mesh="data=2,model=2"; default one device). lora:
    "file.safetensors[:scale]" or a list of them. trace=True keeps every op
    for result.trace(). Returns an EvalResult.
    """
    component = _check.string("component", component)
    precision = _check.string("precision", precision)
    trace = _check.flag("trace", trace)
    spec = mesh_spec(chip, devices, mesh, topology, model_axis_along, threads_per_device, dataflow, vmem_mib)
    if lora is None:
        loras = []
    elif isinstance(lora, (str, os.PathLike)):
        loras = [_check.path("lora", lora)]
    elif isinstance(lora, (list, tuple)):
        loras = [_check.path("lora", x) for x in lora]
    else:
        raise TypeError(f"lora must be 'file.safetensors[:scale]' or a list of them, not {_check._what(lora)}")
    with tempfile.TemporaryDirectory(prefix="tpumesh-eval-") as tmp:
        if model is None:
            model_path = os.path.join(tmp, "default-model.h5")
            with open(model_path, "wb") as f:
                f.write(_tpumesh.default_model_bytes())
            label = _tpumesh.default_model_name
        else:
            model_path, label = _check_readable(model), ""
        if isinstance(inputs, (str, os.PathLike)):
            input_path = _check_readable(inputs)
            input_label = input_path
        else:
            input_path = os.path.join(tmp, "inputs.h5")
            input_label = "inputs"
            write_inputs(input_path, component, inputs)
        out = _tpumesh.eval_component(model_path, label, component, input_path, input_label,
                                      os.path.join(tmp, "outputs.h5"), spec, precision, loras, trace)
    return EvalResult(component, *out)
