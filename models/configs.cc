#include "models/configs.h"

#include <cmath>
#include <limits>
#include <set>

#include "base/json_text.h"
#include "nlohmann/json.hpp"

namespace tpumesh::models {
namespace {

using Json = nlohmann::json;

// The largest size a config may give a dimension (channels, layers, tokens,
// a sample's side): 2^24, far past any real model, and small enough that a
// few of them multiplied stay exact.
constexpr int kMaxConfigValue = 1 << 24;
// Counts that multiply the layers a model builds (and the entries of its
// parameter manifest): layers, blocks, kernel sides.
constexpr int kMaxLayers = 1024;
constexpr int kMaxBlocks = 16;
constexpr int kMaxKernel = 31;
constexpr int kMaxLatentSide = 16384;

// Typed access to one config object; errors name the file and the key.
class Reader {
 public:
  Reader(const Json& j, std::string_view origin) : j_(j), origin_(origin) {}

  Status Error(const std::string& key, const std::string& why) const {
    return InvalidArgumentError(origin_ + ": '" + key + "' " + why);
  }
  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  // A value read from `key` must be from lo to hi: the message names the
  // file, the key and the range ("unet/config.json: 'sample_size' is -8,
  // must be from 1 to 16777216").
  Status Within(const char* key, int64_t v, int64_t lo, int64_t hi) const {
    if (v >= lo && v <= hi) return OkStatus();
    return Error(key, "is " + std::to_string(v) + ", must be from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  // The number of blocks (block_out_channels' entries): each halves the
  // sample and adds layers.
  Status Blocks(size_t n) const {
    if (n >= 1 && n <= kMaxBlocks) return OkStatus();
    return Error("block_out_channels", "has " + std::to_string(n) + " entries, must have 1 to " +
                                           std::to_string(kMaxBlocks));
  }
  // The same for every entry of a list (a per-block value).
  Status Within(const char* key, const std::vector<int>& v, int64_t lo, int64_t hi) const {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] < lo || v[i] > hi)
        return Error(key, "entry " + std::to_string(i) + " is " + std::to_string(v[i]) + ", must be from " +
                              std::to_string(lo) + " to " + std::to_string(hi));
    return OkStatus();
  }

  // An integer that fits an int: 4294967298 is refused, never wrapped to 2.
  Status Int(const char* key, int* out) const {
    if (!Has(key)) return OkStatus();
    const Json& v = j_[key];
    if (!v.is_number_integer()) return Error(key, "must be an integer, got " + DescribeJson(v));
    const double d = v.template get<double>();
    if (d < std::numeric_limits<int>::min() || d > std::numeric_limits<int>::max())
      return Error(key, "is " + v.dump() + ", past the range of an integer here");
    *out = v.get<int>();
    return OkStatus();
  }
  Status Float(const char* key, float* out) const {
    if (!Has(key)) return OkStatus();
    const Json& v = j_[key];
    if (!v.is_number()) return Error(key, "must be a number, got " + DescribeJson(v));
    *out = v.get<float>();
    return OkStatus();
  }
  Status Bool(const char* key, bool* out) const {
    if (!Has(key)) return OkStatus();
    const Json& v = j_[key];
    if (!v.is_boolean()) return Error(key, "must be true or false, got " + DescribeJson(v));
    *out = v.get<bool>();
    return OkStatus();
  }
  Status Strings(const char* key, std::vector<std::string>* out, bool required) const {
    if (!Has(key)) return required ? Error(key, "is missing") : OkStatus();
    const Json& v = j_[key];
    if (!v.is_array()) return Error(key, "must be a list of strings");
    out->clear();
    for (const Json& s : v) {
      if (!s.is_string()) return Error(key, "must be a list of strings");
      out->push_back(s.get<std::string>());
    }
    return OkStatus();
  }
  // An int, or a list of ints of length n (an int is repeated n times).
  Status IntOrList(const char* key, size_t n, std::vector<int>* out) const {
    if (!Has(key)) return OkStatus();
    const Json& v = j_[key];
    if (v.is_number_integer()) {
      out->assign(n, v.get<int>());
      return OkStatus();
    }
    if (!v.is_array() || v.size() != n)
      return Error(key, "must be an integer or a list of " + std::to_string(n) + " integers, got " + DescribeJson(v));
    out->clear();
    for (const Json& e : v) {
      if (!e.is_number_integer() || std::abs(e.template get<double>()) > kMaxConfigValue)
        return Error(key, "must hold integers, got " + DescribeJson(e));
      out->push_back(e.get<int>());
    }
    return OkStatus();
  }
  Status Ints(const char* key, std::vector<int>* out, bool required) const {
    if (!Has(key)) return required ? Error(key, "is missing") : OkStatus();
    const Json& v = j_[key];
    if (!v.is_array() || v.empty()) return Error(key, "must be a non-empty list of integers");
    out->clear();
    for (const Json& e : v) {
      if (!e.is_number_integer() || e.template get<double>() < 1 || e.template get<double>() > kMaxConfigValue)
        return Error(key, "must hold integers from 1 to " + std::to_string(kMaxConfigValue) + ", got " +
                          DescribeJson(e));
      out->push_back(e.get<int>());
    }
    return OkStatus();
  }
  // The key, when present and not null, must equal one of `allowed`.
  Status OneOf(const char* key, std::initializer_list<const char*> allowed) const {
    if (!Has(key)) return OkStatus();
    const Json& v = j_[key];
    const std::string s = v.is_string() ? v.get<std::string>() : DescribeJson(v);
    for (const char* a : allowed)
      if (s == a) return OkStatus();
    std::string list;
    for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
    return Error(key, "= " + DescribeJson(v) + " is not supported (supported: " + list + ")");
  }
  // The key must be absent, null, or equal to `value` (as JSON).
  Status Default(const char* key, const Json& value) const {
    if (!Has(key) || j_[key] == value) return OkStatus();
    if (value.is_number() && j_[key].is_number() && j_[key].get<double>() == value.get<double>()) return OkStatus();
    return Error(key, "= " + DescribeJson(j_[key]) + " is not supported (only " + DescribeJson(value) + ")");
  }

 private:
  const Json& j_;
  std::string origin_;
};

StatusOr<Json> ParseObject(std::string_view text, std::string_view origin) {
  std::string duplicate;
  Json j = ParseJsonOnce<Json>(text, &duplicate);
  if (j.is_discarded()) return InvalidArgumentError(std::string(origin) + ": not valid JSON");
  if (!duplicate.empty())
    return InvalidArgumentError(std::string(origin) + ": an object holds the key " + Quoted(duplicate) +
                                " twice (which one would be meant?)");
  if (!j.is_object()) return InvalidArgumentError(std::string(origin) + ": not a JSON object");
  return j;
}

Status CheckClass(const Json& j, std::string_view origin, const char* want) {
  if (j.contains("_class_name") && j["_class_name"] != want)
    return InvalidArgumentError(std::string(origin) + ": _class_name " + DescribeJson(j["_class_name"]) +
                                " is not " + want);
  return OkStatus();
}

}  // namespace

StatusOr<ClipTextConfig> ParseClipTextConfig(std::string_view json, std::string_view origin) {
  TPUMESH_ASSIGN_OR_RETURN(Json j, ParseObject(json, origin));
  Reader r(j, origin);
  ClipTextConfig c;
  TPUMESH_RETURN_IF_ERROR(r.OneOf("model_type", {"clip_text_model"}));
  TPUMESH_RETURN_IF_ERROR(r.Int("vocab_size", &c.vocab_size));
  TPUMESH_RETURN_IF_ERROR(r.Int("hidden_size", &c.hidden_size));
  TPUMESH_RETURN_IF_ERROR(r.Int("intermediate_size", &c.intermediate_size));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_hidden_layers", &c.num_hidden_layers));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_attention_heads", &c.num_attention_heads));
  TPUMESH_RETURN_IF_ERROR(r.Int("max_position_embeddings", &c.max_position_embeddings));
  TPUMESH_RETURN_IF_ERROR(r.Float("layer_norm_eps", &c.layer_norm_eps));
  TPUMESH_RETURN_IF_ERROR(r.Int("projection_dim", &c.projection_dim));
  TPUMESH_RETURN_IF_ERROR(r.Int("eos_token_id", &c.eos_token_id));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("hidden_act", {"quick_gelu", "gelu"}));
  if (j.contains("architectures") && j["architectures"].is_array()) {
    for (const auto& a : j["architectures"]) {
      if (a == "CLIPTextModelWithProjection") c.with_projection = true;
      else if (a != "CLIPTextModel") return r.Error("architectures", "entry " + DescribeJson(a) + " is not supported");
    }
  }
  if (c.with_projection && c.projection_dim < 1) return r.Error("projection_dim", "must be >= 1 with a projection");
  if (r.Has("hidden_act")) c.hidden_act = j["hidden_act"] == "gelu" ? Activation::kGelu : Activation::kQuickGelu;
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_attention_heads", c.num_attention_heads},
                        {"max_position_embeddings", c.max_position_embeddings}})
    TPUMESH_RETURN_IF_ERROR(r.Within(key, v, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers));
  if (c.with_projection) TPUMESH_RETURN_IF_ERROR(r.Within("projection_dim", c.projection_dim, 1, kMaxConfigValue));
  if (!(c.layer_norm_eps > 0 && c.layer_norm_eps < 1))
    return r.Error("layer_norm_eps", "must be above 0 and below 1");
  if (c.hidden_size % c.num_attention_heads != 0)
    return r.Error("num_attention_heads", "must divide hidden_size " + std::to_string(c.hidden_size));
  return c;
}

StatusOr<UNetConfig> ParseUNetConfig(std::string_view json, std::string_view origin) {
  TPUMESH_ASSIGN_OR_RETURN(Json j, ParseObject(json, origin));
  TPUMESH_RETURN_IF_ERROR(CheckClass(j, origin, "UNet2DConditionModel"));
  Reader r(j, origin);
  UNetConfig c;
  TPUMESH_RETURN_IF_ERROR(r.Strings("down_block_types", &c.down_block_types, true));
  TPUMESH_RETURN_IF_ERROR(r.Strings("up_block_types", &c.up_block_types, true));
  TPUMESH_RETURN_IF_ERROR(r.Ints("block_out_channels", &c.block_out_channels, true));
  const size_t n = c.block_out_channels.size();
  if (c.down_block_types.size() != n || c.up_block_types.size() != n)
    return r.Error("down_block_types", "and up_block_types must have one entry per block_out_channels entry");
  for (const auto& t : c.down_block_types)
    if (t != "DownBlock2D" && t != "CrossAttnDownBlock2D")
      return r.Error("down_block_types", "entry '" + t + "' is not supported (DownBlock2D, CrossAttnDownBlock2D)");
  for (const auto& t : c.up_block_types)
    if (t != "UpBlock2D" && t != "CrossAttnUpBlock2D")
      return r.Error("up_block_types", "entry '" + t + "' is not supported (UpBlock2D, CrossAttnUpBlock2D)");
  TPUMESH_RETURN_IF_ERROR(r.OneOf("mid_block_type", {"UNetMidBlock2DCrossAttn"}));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("act_fn", {"silu"}));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("time_embedding_type", {"positional"}));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("resnet_time_scale_shift", {"default"}));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("attention_type", {"default"}));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("addition_embed_type", {"text_time"}));
  for (const char* key : {"class_embed_type", "encoder_hid_dim", "encoder_hid_dim_type", "num_class_embeds",
                          "time_cond_proj_dim", "timestep_post_act", "time_embedding_act_fn",
                          "cross_attention_norm", "reverse_transformer_layers_per_block"})
    TPUMESH_RETURN_IF_ERROR(r.Default(key, nullptr));
  for (const char* key : {"center_input_sample", "dual_cross_attention", "resnet_skip_time_act",
                          "class_embeddings_concat", "mid_block_only_cross_attention"})
    TPUMESH_RETURN_IF_ERROR(r.Default(key, false));
  TPUMESH_RETURN_IF_ERROR(r.Default("resnet_out_scale_factor", 1.0));
  TPUMESH_RETURN_IF_ERROR(r.Default("only_cross_attention", false));
  TPUMESH_RETURN_IF_ERROR(r.Int("sample_size", &c.sample_size));
  TPUMESH_RETURN_IF_ERROR(r.Int("in_channels", &c.in_channels));
  TPUMESH_RETURN_IF_ERROR(r.Int("out_channels", &c.out_channels));
  TPUMESH_RETURN_IF_ERROR(r.Int("layers_per_block", &c.layers_per_block));
  c.transformer_layers_per_block.assign(n, 1);
  TPUMESH_RETURN_IF_ERROR(r.IntOrList("transformer_layers_per_block", n, &c.transformer_layers_per_block));
  c.cross_attention_dim.assign(n, 1280);
  TPUMESH_RETURN_IF_ERROR(r.IntOrList("cross_attention_dim", n, &c.cross_attention_dim));
  c.num_attention_heads.assign(n, 8);
  TPUMESH_RETURN_IF_ERROR(r.IntOrList("attention_head_dim", n, &c.num_attention_heads));
  TPUMESH_RETURN_IF_ERROR(r.IntOrList("num_attention_heads", n, &c.num_attention_heads));
  TPUMESH_RETURN_IF_ERROR(r.Bool("use_linear_projection", &c.use_linear_projection));
  TPUMESH_RETURN_IF_ERROR(r.Bool("upcast_attention", &c.upcast_attention));
  TPUMESH_RETURN_IF_ERROR(r.Int("norm_num_groups", &c.norm_num_groups));
  TPUMESH_RETURN_IF_ERROR(r.Float("norm_eps", &c.norm_eps));
  TPUMESH_RETURN_IF_ERROR(r.Bool("flip_sin_to_cos", &c.flip_sin_to_cos));
  TPUMESH_RETURN_IF_ERROR(r.Int("freq_shift", &c.freq_shift));
  TPUMESH_RETURN_IF_ERROR(r.Int("time_embedding_dim", &c.time_embedding_dim));
  TPUMESH_RETURN_IF_ERROR(r.Int("conv_in_kernel", &c.conv_in_kernel));
  TPUMESH_RETURN_IF_ERROR(r.Int("conv_out_kernel", &c.conv_out_kernel));
  TPUMESH_RETURN_IF_ERROR(r.Int("downsample_padding", &c.downsample_padding));
  TPUMESH_RETURN_IF_ERROR(r.Float("mid_block_scale_factor", &c.mid_block_scale_factor));
  if (r.Has("addition_embed_type")) {
    c.text_time_embedding = true;
    TPUMESH_RETURN_IF_ERROR(r.Int("addition_time_embed_dim", &c.addition_time_embed_dim));
    TPUMESH_RETURN_IF_ERROR(
        r.Int("projection_class_embeddings_input_dim", &c.projection_class_embeddings_input_dim));
    if (c.addition_time_embed_dim < 1 || c.projection_class_embeddings_input_dim < 1)
      return r.Error("addition_embed_type", "text_time needs addition_time_embed_dim and "
                     "projection_class_embeddings_input_dim");
  }
  // Every number that sizes a layer, in the order of diffusers' signature.
  // The latent side: at most 16384, the largest image side, so that the
  // default image size (this times the VAE's factor, up to 2^15) stays an int.
  TPUMESH_RETURN_IF_ERROR(r.Within("sample_size", c.sample_size, 1, kMaxLatentSide));
  TPUMESH_RETURN_IF_ERROR(r.Within("in_channels", c.in_channels, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("out_channels", c.out_channels, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Blocks(n));
  TPUMESH_RETURN_IF_ERROR(r.Within("layers_per_block", c.layers_per_block, 1, kMaxLayers));
  TPUMESH_RETURN_IF_ERROR(r.Within("transformer_layers_per_block", c.transformer_layers_per_block, 1, kMaxLayers));
  TPUMESH_RETURN_IF_ERROR(r.Within("cross_attention_dim", c.cross_attention_dim, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("attention_head_dim", c.num_attention_heads, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("norm_num_groups", c.norm_num_groups, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("time_embedding_dim", c.time_embedding_dim, 0, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("conv_in_kernel", c.conv_in_kernel, 1, kMaxKernel));
  TPUMESH_RETURN_IF_ERROR(r.Within("conv_out_kernel", c.conv_out_kernel, 1, kMaxKernel));
  TPUMESH_RETURN_IF_ERROR(r.Within("downsample_padding", c.downsample_padding, 0, kMaxKernel));
  if (c.text_time_embedding) {
    TPUMESH_RETURN_IF_ERROR(r.Within("addition_time_embed_dim", c.addition_time_embed_dim, 1, kMaxConfigValue));
    TPUMESH_RETURN_IF_ERROR(r.Within("projection_class_embeddings_input_dim",
                                     c.projection_class_embeddings_input_dim, 1, kMaxConfigValue));
  }
  if (c.conv_in_kernel % 2 == 0 || c.conv_out_kernel % 2 == 0)
    return r.Error("conv_in_kernel", "and conv_out_kernel must be odd");
  if (!(c.norm_eps > 0 && c.norm_eps < 1)) return r.Error("norm_eps", "must be above 0 and below 1");
  for (size_t i = 0; i < n; ++i) {
    const int ch = c.block_out_channels[i];
    if (ch % c.norm_num_groups != 0)
      return r.Error("block_out_channels", "entry " + std::to_string(ch) + " is not divisible by norm_num_groups " +
                     std::to_string(c.norm_num_groups));
    if (c.num_attention_heads[i] < 1 || ch % c.num_attention_heads[i] != 0)
      return r.Error("attention_head_dim", "(heads) " + std::to_string(c.num_attention_heads[i]) +
                     " must divide the block's " + std::to_string(ch) + " channels");
  }
  return c;
}

StatusOr<VaeConfig> ParseVaeConfig(std::string_view json, std::string_view origin) {
  TPUMESH_ASSIGN_OR_RETURN(Json j, ParseObject(json, origin));
  TPUMESH_RETURN_IF_ERROR(CheckClass(j, origin, "AutoencoderKL"));
  Reader r(j, origin);
  VaeConfig c;
  TPUMESH_RETURN_IF_ERROR(r.Ints("block_out_channels", &c.block_out_channels, true));
  std::vector<std::string> down, up;
  TPUMESH_RETURN_IF_ERROR(r.Strings("down_block_types", &down, false));
  TPUMESH_RETURN_IF_ERROR(r.Strings("up_block_types", &up, false));
  for (const auto& t : down)
    if (t != "DownEncoderBlock2D") return r.Error("down_block_types", "entry '" + t + "' is not supported (DownEncoderBlock2D)");
  for (const auto& t : up)
    if (t != "UpDecoderBlock2D") return r.Error("up_block_types", "entry '" + t + "' is not supported (UpDecoderBlock2D)");
  if ((!down.empty() && down.size() != c.block_out_channels.size()) ||
      (!up.empty() && up.size() != c.block_out_channels.size()))
    return r.Error("down_block_types", "and up_block_types must have one entry per block_out_channels entry");
  TPUMESH_RETURN_IF_ERROR(r.OneOf("act_fn", {"silu"}));
  for (const char* key : {"latents_mean", "latents_std"}) TPUMESH_RETURN_IF_ERROR(r.Default(key, nullptr));
  TPUMESH_RETURN_IF_ERROR(r.Float("shift_factor", &c.shift_factor));
  TPUMESH_RETURN_IF_ERROR(r.Int("in_channels", &c.in_channels));
  TPUMESH_RETURN_IF_ERROR(r.Int("out_channels", &c.out_channels));
  TPUMESH_RETURN_IF_ERROR(r.Int("latent_channels", &c.latent_channels));
  TPUMESH_RETURN_IF_ERROR(r.Bool("force_upcast", &c.force_upcast));
  TPUMESH_RETURN_IF_ERROR(r.Int("layers_per_block", &c.layers_per_block));
  TPUMESH_RETURN_IF_ERROR(r.Int("norm_num_groups", &c.norm_num_groups));
  TPUMESH_RETURN_IF_ERROR(r.Int("sample_size", &c.sample_size));
  TPUMESH_RETURN_IF_ERROR(r.Float("scaling_factor", &c.scaling_factor));
  TPUMESH_RETURN_IF_ERROR(r.Bool("mid_block_add_attention", &c.mid_block_add_attention));
  TPUMESH_RETURN_IF_ERROR(r.Bool("use_quant_conv", &c.use_quant_conv));
  TPUMESH_RETURN_IF_ERROR(r.Bool("use_post_quant_conv", &c.use_post_quant_conv));
  TPUMESH_RETURN_IF_ERROR(r.Within("in_channels", c.in_channels, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("out_channels", c.out_channels, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("latent_channels", c.latent_channels, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Blocks(c.block_out_channels.size()));
  TPUMESH_RETURN_IF_ERROR(r.Within("layers_per_block", c.layers_per_block, 1, kMaxLayers));
  TPUMESH_RETURN_IF_ERROR(r.Within("norm_num_groups", c.norm_num_groups, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("sample_size", c.sample_size, 1, kMaxConfigValue));
  if (!(c.scaling_factor > 0 && std::isfinite(c.scaling_factor)))
    return r.Error("scaling_factor", "must be a finite number above 0");
  if (!std::isfinite(c.shift_factor)) return r.Error("shift_factor", "must be a finite number");
  for (int ch : c.block_out_channels)
    if (ch % c.norm_num_groups != 0)
      return r.Error("block_out_channels", "entry " + std::to_string(ch) + " is not divisible by norm_num_groups " +
                     std::to_string(c.norm_num_groups));
  return c;
}

StatusOr<T5EncoderConfig> ParseT5EncoderConfig(std::string_view json, std::string_view origin) {
  TPUMESH_ASSIGN_OR_RETURN(Json j, ParseObject(json, origin));
  Reader r(j, origin);
  T5EncoderConfig c;
  TPUMESH_RETURN_IF_ERROR(r.OneOf("model_type", {"t5"}));
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a != "T5EncoderModel") return r.Error("architectures", "entry " + DescribeJson(a) + " is not supported");
  // T5 v1.1's gated GELU (gelu_new, the tanh approximation) is what Flux
  // ships; the original T5's relu is not implemented.
  TPUMESH_RETURN_IF_ERROR(r.OneOf("feed_forward_proj", {"gated-gelu"}));
  TPUMESH_RETURN_IF_ERROR(r.OneOf("dense_act_fn", {"gelu_new"}));
  TPUMESH_RETURN_IF_ERROR(r.Int("vocab_size", &c.vocab_size));
  TPUMESH_RETURN_IF_ERROR(r.Int("d_model", &c.d_model));
  TPUMESH_RETURN_IF_ERROR(r.Int("d_kv", &c.d_kv));
  TPUMESH_RETURN_IF_ERROR(r.Int("d_ff", &c.d_ff));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_layers", &c.num_layers));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_heads", &c.num_heads));
  TPUMESH_RETURN_IF_ERROR(r.Int("relative_attention_num_buckets", &c.relative_attention_num_buckets));
  TPUMESH_RETURN_IF_ERROR(r.Int("relative_attention_max_distance", &c.relative_attention_max_distance));
  TPUMESH_RETURN_IF_ERROR(r.Float("layer_norm_epsilon", &c.layer_norm_epsilon));
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_kv", c.d_kv},
                        {"d_ff", c.d_ff}, {"num_heads", c.num_heads},
                        {"relative_attention_max_distance", c.relative_attention_max_distance}})
    TPUMESH_RETURN_IF_ERROR(r.Within(key, v, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("num_layers", c.num_layers, 1, kMaxLayers));
  // Bidirectional buckets: half for each direction, half of those exact.
  TPUMESH_RETURN_IF_ERROR(r.Within("relative_attention_num_buckets", c.relative_attention_num_buckets, 4, 4096));
  if (!(c.layer_norm_epsilon > 0 && c.layer_norm_epsilon < 1))
    return r.Error("layer_norm_epsilon", "must be above 0 and below 1");
  return c;
}

StatusOr<FluxTransformerConfig> ParseFluxTransformerConfig(std::string_view json, std::string_view origin) {
  TPUMESH_ASSIGN_OR_RETURN(Json j, ParseObject(json, origin));
  TPUMESH_RETURN_IF_ERROR(CheckClass(j, origin, "FluxTransformer2DModel"));
  Reader r(j, origin);
  FluxTransformerConfig c;
  TPUMESH_RETURN_IF_ERROR(r.Default("patch_size", 1));
  TPUMESH_RETURN_IF_ERROR(r.Int("in_channels", &c.in_channels));
  TPUMESH_RETURN_IF_ERROR(r.Int("out_channels", &c.out_channels));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_layers", &c.num_layers));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_single_layers", &c.num_single_layers));
  TPUMESH_RETURN_IF_ERROR(r.Int("attention_head_dim", &c.attention_head_dim));
  TPUMESH_RETURN_IF_ERROR(r.Int("num_attention_heads", &c.num_attention_heads));
  TPUMESH_RETURN_IF_ERROR(r.Int("joint_attention_dim", &c.joint_attention_dim));
  TPUMESH_RETURN_IF_ERROR(r.Int("pooled_projection_dim", &c.pooled_projection_dim));
  TPUMESH_RETURN_IF_ERROR(r.Bool("guidance_embeds", &c.guidance_embeds));
  if (r.Has("axes_dims_rope")) TPUMESH_RETURN_IF_ERROR(r.Ints("axes_dims_rope", &c.axes_dims_rope, true));
  for (auto [key, v] : {std::pair{"in_channels", c.in_channels}, {"attention_head_dim", c.attention_head_dim},
                        {"num_attention_heads", c.num_attention_heads},
                        {"joint_attention_dim", c.joint_attention_dim},
                        {"pooled_projection_dim", c.pooled_projection_dim}})
    TPUMESH_RETURN_IF_ERROR(r.Within(key, v, 1, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("out_channels", c.out_channels, 0, kMaxConfigValue));
  TPUMESH_RETURN_IF_ERROR(r.Within("num_layers", c.num_layers, 0, kMaxLayers));
  TPUMESH_RETURN_IF_ERROR(r.Within("num_single_layers", c.num_single_layers, 0, kMaxLayers));
  if (c.in_channels % 4 != 0 || c.out() % 4 != 0)
    return r.Error("in_channels", "must be 4 x the latent channels (2x2 patches packed), got " +
                                      std::to_string(c.in_channels));
  int64_t rope = 0;
  for (int d : c.axes_dims_rope) {
    if (d % 2 != 0) return r.Error("axes_dims_rope", "entries must be even, got " + std::to_string(d));
    rope += d;
  }
  if (c.axes_dims_rope.size() != 3 || rope != c.attention_head_dim)
    return r.Error("axes_dims_rope", "must be 3 even entries summing to attention_head_dim " +
                                         std::to_string(c.attention_head_dim));
  return c;
}

}  // namespace tpumesh::models
