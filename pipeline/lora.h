// LoRA: low-rank weight deltas from .safetensors files, fused into a
// model's weights as they are loaded (before the loader splits them over the
// mesh's model axis and before anything packs them), as diffusers'
// `pipe.load_lora_weights(file); pipe.fuse_lora(lora_scale=SCALE)` does.
//
// For each module a LoRA names (a Linear or conv weight W [out, in] or
// [out, in, kh, kw] of the UNet or a CLIP text encoder):
//
//   W += f32(SCALE * alpha / rank) * (up @ down)
//
// down [rank, in] (conv: [rank, in, kh, kw]), up [out, rank] (conv:
// [out, rank, 1, 1]); the product is summed in f32 and then scaled, as peft's
// get_delta_weight. A weight held in bf16 (a bf16 model file) gets the delta
// as peft fuses into a bf16 layer: down and up rounded to bf16, the product
// in f32, rounded to bf16, then added and rounded again. Several LoRAs fuse
// one after the other, in the order given (diffusers: load, fuse, unload,
// then the next).
//
// Key formats (the format is the file's, never mixed):
// - kohya (sd-scripts, A1111, ComfyUI): every key starts with lora_unet_,
//   lora_te_ / lora_te1_ (text_encoder) or lora_te2_ (text_encoder_2), then
//   the module path with '_' for '.', then .lora_down.weight,
//   .lora_up.weight and .alpha. UNet paths in diffusers' layout
//   (down_blocks_0_attentions_0_...) or in the SGM/LDM layout kohya uses for
//   SDXL (input_blocks_4_1_..., middle_block_1_..., output_blocks_..., with
//   in_layers_2 / out_layers_3 / emb_layers_1 / skip_connection, op,
//   time_embed_N, label_emb_0_N, input_blocks_0_0 = conv_in, out_2 =
//   conv_out), mapped as diffusers' _maybe_map_sgm_blocks_to_diffusers with
//   the model's layers_per_block (for every family: diffusers maps them in
//   its SDXL pipeline only; output_blocks_N_1_conv is the upsampler of an up
//   block without attentions, as in SD 1.x's LDM layout). alpha: the module's .alpha (a scalar);
//   without any .alpha in a component, alpha = rank. One deviation from
//   diffusers 0.42.1, on purpose: diffusers applies a module's own alpha only
//   where its renamed key happens to match the module (resnet convs,
//   proj_in/out, ff, embeddings) and gives UNet attention projections
//   (to_q/k/v/out) and transformers-5 CLIPTextModel layers the component's
//   most common alpha instead; tpumesh uses each module's own, as kohya,
//   A1111 and ComfyUI do. The two agree whenever those modules' alpha is the
//   most common one (a file with one network alpha; LoCon's conv alpha).
// - diffusers / PEFT: unet.*, text_encoder.*, text_encoder_2.* with
//   MODULE.lora_A.weight / MODULE.lora_B.weight, and the older diffusers
//   names (MODULE.lora.down/up.weight, ...processor.to_q_lora.down.weight,
//   MODULE.lora_linear_layer.down/up.weight, self_attn.to_q_lora.* for the
//   text encoders). alpha from the file's diffusers metadata
//   (__metadata__.lora_adapter_metadata: COMPONENT.r, lora_alpha,
//   rank_pattern, alpha_pattern, use_rslora, as peft's LoraConfig; a pattern
//   matches a module whose name is it or ends with "." + it, "^" anchoring
//   at the start); a component without metadata has alpha = rank.
// Text-encoder module paths may carry transformers' "text_model." or not.
//
// Contract: LoraSet::Open reads and checks every file before any weight is
// read: each key known and used, every down with its up, ranks equal between
// down and up (and to the metadata's), each module present in the model with
// shapes that fit it, values finite. Any problem is one InvalidArgument (or
// NotFound for a missing file) naming the file and the key. Fuse then only
// adds.
#ifndef TPUMESH_PIPELINE_LORA_H_
#define TPUMESH_PIPELINE_LORA_H_

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/model_file.h"
#include "mesh/array.h"

namespace tpumesh::pipeline {

// One --lora: FILE[:SCALE].
struct LoraSpec {
  std::string path;
  double scale = 1.0;
};
// "FILE" (scale 1) or "FILE:SCALE", SCALE a finite number (negative
// allowed: a LoRA subtracted). A FILE that exists as given is taken whole
// (its name may hold ':'). InvalidArgument naming --lora for an empty file
// name or a bad scale.
StatusOr<LoraSpec> ParseLoraSpec(const std::string& text);
// "name.safetensors:0.75" (the file name and the scale as %g), for the PNG
// parameters and the logs.
std::string LoraLabel(const LoraSpec& spec);

// The Linear and conv weights (rank 2 and 4 ".weight" tensors) a LoRA may
// modify: component -> parameter name -> shape, for the components the model
// has among unet, text_encoder and text_encoder_2.
using LoraTargets = std::map<std::string, std::map<std::string, mesh::Shape>>;
StatusOr<LoraTargets> ReadLoraTargets(const ModelFile& file);

class LoraSet {
 public:
  LoraSet() = default;
  // Reads and checks each file against `targets` (Contract above).
  static StatusOr<LoraSet> Open(const std::vector<LoraSpec>& specs, const LoraTargets& targets);

  bool empty() const { return loras_.empty(); }
  // LoraLabel of each, ", "-joined.
  std::string Label() const;
  // The weights of `component` the set changes.
  std::vector<std::string> Touched(const std::string& component) const;
  // Adds every LoRA's delta to the weights of `component` among `params`
  // (f32 or bf16 host arrays, modified in place; a shared array is copied
  // first), in the order of the specs. The weights must have the shapes
  // Open checked (InvalidArgument otherwise).
  Status Fuse(const std::string& component, std::map<std::string, mesh::Array>* params) const;

 private:
  struct Module {
    std::string component, weight;  // e.g. "unet", "conv_in.weight"
    std::string key;                // the file's down key, for messages
    mesh::Array down, up;           // f32 [rank, in*kh*kw], [out, rank]
    double scaling = 1;             // scale * alpha / rank
  };
  struct Lora {
    LoraSpec spec;
    std::vector<Module> modules;
  };
  std::vector<Lora> loras_;
};

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_LORA_H_
