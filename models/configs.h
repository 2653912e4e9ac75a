// Typed configs of the Stable Diffusion and Flux.1 components, parsed from
// the config.json that diffusers / transformers write, and the parameter
// manifest each config implies (every parameter's checkpoint name and shape).
//
// Contract: Parse* read every key that changes the computation; a value
// tpumesh does not implement (a block type, an activation, an embedding type)
// is InvalidArgument naming the file, the key and the value, never silently
// ignored. Keys that do not change inference (dropout, _diffusers_version,
// initializer ranges, ...) are ignored. The manifests follow diffusers'
// module structure exactly, so a checkpoint's names and shapes can be checked
// against them before any compute (tests compare them with real checkpoints);
// they are derived from the block declarations of blocks.h, as the FLOP
// counts of flops.h are.
#ifndef TPUMESH_MODELS_CONFIGS_H_
#define TPUMESH_MODELS_CONFIGS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"

namespace tpumesh::models {

enum class Activation { kSilu, kGelu, kQuickGelu };

// transformers' CLIPTextConfig.
struct ClipTextConfig {
  int vocab_size = 49408;
  int hidden_size = 768;
  int intermediate_size = 3072;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int max_position_embeddings = 77;
  float layer_norm_eps = 1e-5f;
  Activation hidden_act = Activation::kQuickGelu;  // "quick_gelu" or "gelu"
  int projection_dim = 0;
  // Where the pooled output is taken (transformers' CLIPTextTransformer):
  // 2, CLIP's legacy value that every SD / SDXL config keeps, means the
  // highest id of each row (the first <|endoftext|> of the real vocabulary);
  // any other value, the first position holding that id.
  int eos_token_id = 2;
  // CLIPTextModelWithProjection (SDXL's second encoder): adds
  // text_projection [projection_dim, hidden_size], no bias.
  bool with_projection = false;
};

// diffusers' UNet2DConditionModel (the SD 1.x / 2.x subset, plus SDXL's
// added time/text conditioning for pricing).
struct UNetConfig {
  int sample_size = 64;
  int in_channels = 4;
  int out_channels = 4;
  std::vector<std::string> down_block_types;  // DownBlock2D | CrossAttnDownBlock2D
  std::vector<std::string> up_block_types;    // UpBlock2D | CrossAttnUpBlock2D
  std::vector<int> block_out_channels;
  int layers_per_block = 2;
  std::vector<int> transformer_layers_per_block;  // per down block
  std::vector<int> cross_attention_dim;           // per down block
  // Heads per down block. diffusers reads `attention_head_dim` as the NUMBER
  // of heads when `num_attention_heads` is null (a historical naming quirk).
  std::vector<int> num_attention_heads;
  bool use_linear_projection = false;
  bool upcast_attention = false;
  bool only_cross_attention = false;
  int norm_num_groups = 32;
  float norm_eps = 1e-5f;
  bool flip_sin_to_cos = true;
  int freq_shift = 0;
  int time_embedding_dim = 0;  // 0: 4 x block_out_channels[0]
  int conv_in_kernel = 3;
  int conv_out_kernel = 3;
  int downsample_padding = 1;
  float mid_block_scale_factor = 1.0f;
  // SDXL: addition_embed_type "text_time".
  bool text_time_embedding = false;
  int addition_time_embed_dim = 0;
  int projection_class_embeddings_input_dim = 0;

  int time_embed_dim() const {
    return time_embedding_dim > 0 ? time_embedding_dim : 4 * block_out_channels[0];
  }
};

// diffusers' AutoencoderKL.
struct VaeConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 4;
  std::vector<int> block_out_channels;
  int layers_per_block = 2;
  int norm_num_groups = 32;
  int sample_size = 512;
  float scaling_factor = 0.18215f;
  bool mid_block_add_attention = true;
  bool use_quant_conv = true;
  bool use_post_quant_conv = true;
  // diffusers upcasts an fp16 VAE to f32 when this is set (SDXL's VAE
  // overflows in fp16). tpumesh's VAE keeps f32 activations and, at
  // precision default, bf16 matmul operands, whose exponent range is f32's:
  // there is nothing to upcast, so it is read and reported, not acted on.
  bool force_upcast = true;
  // Flux's VAE: latents are (x - shift_factor) * scaling_factor, so the
  // decoder gets x / scaling_factor + shift_factor. 0 for SD's.
  float shift_factor = 0.0f;

  // Image pixels per latent pixel: 2^(blocks - 1).
  int scale_factor() const { return 1 << (static_cast<int>(block_out_channels.size()) - 1); }
};

// transformers' T5Config as T5EncoderModel reads it (Flux's text_encoder_2:
// the T5 v1.1 encoder, gated-gelu feed-forward, RMS layer norms, relative
// position buckets; no attention scaling, as T5).
struct T5EncoderConfig {
  int vocab_size = 32128;
  int d_model = 4096;
  int d_kv = 64;
  int d_ff = 10240;
  int num_layers = 24;
  int num_heads = 64;
  int relative_attention_num_buckets = 32;
  int relative_attention_max_distance = 128;
  float layer_norm_epsilon = 1e-6f;
  int inner_dim() const { return num_heads * d_kv; }
};

// diffusers' FluxTransformer2DModel (patch_size 1: the pipeline packs 2x2
// latent patches into in_channels = 4 x latent channels itself).
struct FluxTransformerConfig {
  int in_channels = 64;
  int out_channels = 0;  // 0: in_channels
  int num_layers = 19;         // double-stream (joint) blocks
  int num_single_layers = 38;  // single-stream blocks
  int attention_head_dim = 128;
  int num_attention_heads = 24;
  int joint_attention_dim = 4096;   // the T5 width
  int pooled_projection_dim = 768;  // the CLIP pooled width
  bool guidance_embeds = false;     // FLUX.1-dev: true
  std::vector<int> axes_dims_rope = {16, 56, 56};
  int dim() const { return num_attention_heads * attention_head_dim; }
  int out() const { return out_channels > 0 ? out_channels : in_channels; }
};

// `origin` names the file in error messages ("unet/config.json").
StatusOr<ClipTextConfig> ParseClipTextConfig(std::string_view json, std::string_view origin);
StatusOr<UNetConfig> ParseUNetConfig(std::string_view json, std::string_view origin);
StatusOr<VaeConfig> ParseVaeConfig(std::string_view json, std::string_view origin);
StatusOr<T5EncoderConfig> ParseT5EncoderConfig(std::string_view json, std::string_view origin);
StatusOr<FluxTransformerConfig> ParseFluxTransformerConfig(std::string_view json, std::string_view origin);

// How a parameter splits over the `model` axis of a mesh (tensor
// parallelism, docs/sharding.md). Along `dim` the parameter holds `parts`
// equal parts (GEGLU's [value; gate] projection holds 2), each made of
// `units` indivisible units (attention heads, GroupNorm groups, feed-forward
// columns); rank r of M holds units [units r / M, units (r + 1) / M) of every
// part. A parameter stays whole on every rank (replicated) when dim < 0, when
// M exceeds the units, or, for an `even` split (a layer whose output is
// all_gathered, which needs equal shards), when M does not divide them. The
// layers of one block share their units, so they split or stay whole
// together.
struct ParamSplit {
  int dim = -1;
  int64_t units = 0;
  int parts = 1;
  bool even = false;
  const char* unit = "";  // what a unit is: "heads", "groups", "columns", "channels"
  bool SplitsOver(int m) const { return dim >= 0 && m > 1 && units >= m && (!even || units % m == 0); }
};

struct ParamSpec {
  std::string name;  // as in the checkpoint
  mesh::Shape shape;
  ParamSplit split;  // replicated unless stated
};
// The manifests (defined in blocks.cc, from the block declarations).
std::vector<ParamSpec> ClipTextParams(const ClipTextConfig& c);
std::vector<ParamSpec> UNetParams(const UNetConfig& c);
std::vector<ParamSpec> VaeParams(const VaeConfig& c);
std::vector<ParamSpec> T5EncoderParams(const T5EncoderConfig& c);
std::vector<ParamSpec> FluxTransformerParams(const FluxTransformerConfig& c);
int64_t CountParameters(const std::vector<ParamSpec>& params);

}  // namespace tpumesh::models

#endif  // TPUMESH_MODELS_CONFIGS_H_
