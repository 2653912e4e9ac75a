#include "pipeline/single_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "base/input_file.h"
#include "io/model_file.h"
#include "models/architectures.h"
#include "models/configs.h"
#include "nlohmann/json.hpp"
#include "pipeline/clip_vocab.h"
#include "pipeline/loader.h"
#include "text/embedded.h"

namespace tpumesh::pipeline {
namespace {

namespace fs = std::filesystem;
using Op = MappedTensor::Op;

constexpr char kUnetPrefix[] = "model.diffusion_model.";
// diffusers' CHECKPOINT_KEY_NAMES entries that tell the text encoders apart.
constexpr char kClipKey[] = "cond_stage_model.transformer.text_model.embeddings.position_embedding.weight";
constexpr char kClipSdxlKey[] = "conditioner.embedders.0.transformer.text_model.embeddings.position_embedding.weight";
constexpr char kOpenClipKey[] = "cond_stage_model.model.token_embedding.weight";
constexpr char kOpenClipSdxlKey[] = "conditioner.embedders.1.model.positional_embedding";
constexpr char kOpenClipRefinerKey[] = "conditioner.embedders.0.model.text_projection";
constexpr char kSd2Prefix[] = "cond_stage_model.model.";

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

// "12.rest" -> (12, "rest"); false when the text does not start with digits
// and a dot.
bool SplitIndex(std::string_view s, int* index, std::string_view* rest) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == 0 || i > 6 || i >= s.size() || s[i] != '.') return false;
  *index = std::stoi(std::string(s.substr(0, i)));
  *rest = s.substr(i + 1);
  return true;
}

bool IsFloat(const std::string& dtype) { return dtype == "F32" || dtype == "F16" || dtype == "BF16"; }

// update_unet_resnet_ldm_to_diffusers' renames.
std::string UNetResnetName(std::string rest) {
  for (auto [from, to] : {std::pair{"in_layers.0", "norm1"}, {"in_layers.2", "conv1"}, {"out_layers.0", "norm2"},
                          {"out_layers.3", "conv2"}, {"emb_layers.1", "time_emb_proj"},
                          {"skip_connection", "conv_shortcut"}})
    rest = ReplaceAll(rest, from, to);
  return rest;
}

// convert_ldm_unet_checkpoint: the name within the UNet, or "" when no rule
// maps the key (k without model.diffusion_model.).
std::string UNetName(const std::string& k, int layers_per_block, bool text_time) {
  static const std::map<std::string, std::string> kFixed = {
      {"time_embed.0.weight", "time_embedding.linear_1.weight"}, {"time_embed.0.bias", "time_embedding.linear_1.bias"},
      {"time_embed.2.weight", "time_embedding.linear_2.weight"}, {"time_embed.2.bias", "time_embedding.linear_2.bias"},
      {"input_blocks.0.0.weight", "conv_in.weight"},             {"input_blocks.0.0.bias", "conv_in.bias"},
      {"out.0.weight", "conv_norm_out.weight"},                  {"out.0.bias", "conv_norm_out.bias"},
      {"out.2.weight", "conv_out.weight"},                       {"out.2.bias", "conv_out.bias"}};
  static const std::map<std::string, std::string> kTextTime = {
      {"label_emb.0.0.weight", "add_embedding.linear_1.weight"}, {"label_emb.0.0.bias", "add_embedding.linear_1.bias"},
      {"label_emb.0.2.weight", "add_embedding.linear_2.weight"}, {"label_emb.0.2.bias", "add_embedding.linear_2.bias"}};
  if (auto it = kFixed.find(k); it != kFixed.end()) return it->second;
  if (text_time)
    if (auto it = kTextTime.find(k); it != kTextTime.end()) return it->second;
  const int per_block = layers_per_block + 1;
  int i = 0, j = 0;
  std::string_view rest, tail;
  if (StartsWith(k, "input_blocks.") && SplitIndex(std::string_view(k).substr(13), &i, &rest) &&
      SplitIndex(rest, &j, &tail) && i >= 1) {
    const std::string at = std::to_string((i - 1) / per_block) + ".";
    const std::string layer = std::to_string((i - 1) % per_block) + ".";
    if (j == 0 && StartsWith(tail, "op")) {
      if (tail == "op.weight" || tail == "op.bias")
        return "down_blocks." + at + "downsamplers.0.conv." + std::string(tail.substr(3));
      return "";
    }
    if (j == 0) return "down_blocks." + at + "resnets." + layer + UNetResnetName(std::string(tail));
    if (j == 1) return "down_blocks." + at + "attentions." + layer + std::string(tail);
    return "";
  }
  if (StartsWith(k, "middle_block.") && SplitIndex(std::string_view(k).substr(13), &j, &tail)) {
    const std::string n = std::to_string(std::max(j - 1, 0));
    if (j % 2 == 0) return "mid_block.resnets." + n + "." + UNetResnetName(std::string(tail));
    return "mid_block.attentions." + n + "." + std::string(tail);
  }
  if (StartsWith(k, "output_blocks.") && SplitIndex(std::string_view(k).substr(14), &i, &rest) &&
      SplitIndex(rest, &j, &tail)) {
    const std::string at = std::to_string(i / per_block) + ".";
    const std::string layer = std::to_string(i % per_block) + ".";
    if ((j == 1 || j == 2) && (tail == "conv.weight" || tail == "conv.bias"))
      return "up_blocks." + at + "upsamplers.0.conv." + std::string(tail.substr(5));
    if (j == 0 && !StartsWith(tail, "op")) return "up_blocks." + at + "resnets." + layer + UNetResnetName(std::string(tail));
    if (j == 1 && !StartsWith(tail, "conv")) return "up_blocks." + at + "attentions." + layer + std::string(tail);
    return "";
  }
  return "";
}

// convert_ldm_vae_checkpoint: the name within the VAE, or "" (k without the
// VAE prefix). Sets *squeeze for the attention's conv weights.
std::string VaeName(const std::string& k, int blocks, bool* squeeze) {
  static const std::map<std::string, std::string> kFixed = {
      {"encoder.conv_in.weight", "encoder.conv_in.weight"}, {"encoder.conv_in.bias", "encoder.conv_in.bias"},
      {"encoder.conv_out.weight", "encoder.conv_out.weight"}, {"encoder.conv_out.bias", "encoder.conv_out.bias"},
      {"encoder.norm_out.weight", "encoder.conv_norm_out.weight"}, {"encoder.norm_out.bias", "encoder.conv_norm_out.bias"},
      {"decoder.conv_in.weight", "decoder.conv_in.weight"}, {"decoder.conv_in.bias", "decoder.conv_in.bias"},
      {"decoder.conv_out.weight", "decoder.conv_out.weight"}, {"decoder.conv_out.bias", "decoder.conv_out.bias"},
      {"decoder.norm_out.weight", "decoder.conv_norm_out.weight"}, {"decoder.norm_out.bias", "decoder.conv_norm_out.bias"},
      {"quant_conv.weight", "quant_conv.weight"}, {"quant_conv.bias", "quant_conv.bias"},
      {"post_quant_conv.weight", "post_quant_conv.weight"}, {"post_quant_conv.bias", "post_quant_conv.bias"}};
  *squeeze = false;
  if (auto it = kFixed.find(k); it != kFixed.end()) return it->second;
  auto resnet = [](std::string_view tail) { return ReplaceAll(std::string(tail), "nin_shortcut", "conv_shortcut"); };
  int b = 0, j = 0;
  std::string_view rest, tail;
  for (const char* coder : {"encoder.", "decoder."}) {
    if (!StartsWith(k, coder)) continue;
    const std::string_view s = std::string_view(k).substr(8);
    const bool enc = coder[0] == 'e';
    if (StartsWith(s, enc ? "down." : "up.") && SplitIndex(s.substr(enc ? 5 : 3), &b, &rest) && b < blocks) {
      const std::string at = std::string(coder) + (enc ? "down_blocks." : "up_blocks.") +
                             std::to_string(enc ? b : blocks - 1 - b) + ".";
      if (StartsWith(rest, "block.") && SplitIndex(rest.substr(6), &j, &tail))
        return at + "resnets." + std::to_string(j) + "." + resnet(tail);
      const std::string sample = enc ? "downsample.conv." : "upsample.conv.";
      if (rest == sample + "weight" || rest == sample + "bias")
        return at + (enc ? "downsamplers" : "upsamplers") + ".0.conv." + std::string(rest.substr(sample.size()));
      return "";
    }
    if (StartsWith(s, "mid.block_1.")) return std::string(coder) + "mid_block.resnets.0." + resnet(s.substr(12));
    if (StartsWith(s, "mid.block_2.")) return std::string(coder) + "mid_block.resnets.1." + resnet(s.substr(12));
    if (StartsWith(s, "mid.attn_1.")) {
      std::string t(s.substr(11));
      for (auto [from, to] : {std::pair{"norm.weight", "group_norm.weight"}, {"norm.bias", "group_norm.bias"},
                              {"q.weight", "to_q.weight"}, {"q.bias", "to_q.bias"}, {"k.weight", "to_k.weight"},
                              {"k.bias", "to_k.bias"}, {"v.weight", "to_v.weight"}, {"v.bias", "to_v.bias"},
                              {"proj_out.weight", "to_out.0.weight"}, {"proj_out.bias", "to_out.0.bias"}})
        t = ReplaceAll(t, from, to);
      *squeeze = true;
      return std::string(coder) + "mid_block.attentions.0." + t;
    }
  }
  return "";
}

// convert_open_clip_checkpoint's renames of a transformer.* key (without the
// prefix and "transformer."), in its order.
std::string OpenClipName(std::string k) {
  for (auto [to, from] : {std::pair{"text_model.encoder.layers.", "resblocks."}, {"layer_norm1", "ln_1"},
                          {"layer_norm2", "ln_2"}, {".fc1.", ".c_fc."}, {".fc2.", ".c_proj."}, {".self_attn", ".attn"},
                          {"transformer.text_model.final_layer_norm.", "ln_final."},
                          {"transformer.text_model.embeddings.token_embedding.weight", "token_embedding.weight"},
                          {"transformer.text_model.embeddings.position_embedding.weight", "positional_embedding"}}) {
    k = ReplaceAll(k, from, to);
    k = ReplaceAll(k, ".in_proj_weight", "");
    k = ReplaceAll(k, ".in_proj_bias", "");
  }
  return k;
}

bool Sd2Ignored(const std::string& key) {
  if (key == std::string(kSd2Prefix) + "text_projection") return true;
  const std::string last = std::string(kSd2Prefix) + "transformer.resblocks.23.";
  if (!StartsWith(key, last)) return false;
  static const std::set<std::string> kTails = {"attn.in_proj_bias", "attn.in_proj_weight", "attn.out_proj.bias",
                                               "attn.out_proj.weight", "ln_1.bias", "ln_1.weight", "ln_2.bias",
                                               "ln_2.weight", "mlp.c_fc.bias", "mlp.c_fc.weight",
                                               "mlp.c_proj.bias", "mlp.c_proj.weight"};
  return kTails.count(key.substr(last.size())) > 0;
}

class Mapper {
 public:
  Mapper(const SafetensorsFile& file, LdmMapping* out) : file_(file), out_(out) {}
  // The file tensors some rule has mapped.
  const std::set<std::string>& used() const { return used_; }

  void Add(const std::string& component, const std::string& name, const SafetensorsEntry& e, Op op = Op::kCopy,
           int64_t begin = 0, int64_t end = 0) {
    MappedTensor t{component, name, e.name, op, begin, end, e.shape};
    if (op == Op::kSqueeze) t.shape.resize(std::min<size_t>(2, t.shape.size()));
    if (op == Op::kTranspose && t.shape.size() == 2) std::swap(t.shape[0], t.shape[1]);
    if (op == Op::kRows && !t.shape.empty()) t.shape[0] = end - begin;
    used_.insert(e.name);
    // A later rule for the same parameter replaces an earlier one, as a
    // later dict assignment does in diffusers.
    const std::string key = component + "/" + name;
    if (auto it = index_.find(key); it != index_.end()) {
      out_->tensors[it->second] = std::move(t);
      return;
    }
    index_[key] = out_->tensors.size();
    out_->tensors.push_back(std::move(t));
  }

  Status Unet(const models::UNetConfig& c) {
    for (const SafetensorsEntry& e : file_.entries()) {
      if (!StartsWith(e.name, kUnetPrefix)) continue;
      const std::string name = UNetName(e.name.substr(strlen(kUnetPrefix)), c.layers_per_block, c.text_time_embedding);
      if (!name.empty()) Add("unet", name, e);
    }
    return OkStatus();
  }

  Status Vae(const models::VaeConfig& c) {
    // The last of diffusers' LDM_VAE_KEYS that some key starts with.
    std::string prefix;
    for (const char* p : {"first_stage_model.", "vae."})
      for (const SafetensorsEntry& e : file_.entries())
        if (StartsWith(e.name, p)) {
          prefix = p;
          break;
        }
    if (prefix.empty()) return InvalidArgumentError(file_.path() + ": no VAE (first_stage_model.* or vae.*)");
    const int blocks = static_cast<int>(c.block_out_channels.size());
    for (const SafetensorsEntry& e : file_.entries()) {
      if (!StartsWith(e.name, prefix)) continue;
      bool squeeze = false;
      const std::string name = VaeName(e.name.substr(prefix.size()), blocks, &squeeze);
      if (name.empty()) continue;
      if (squeeze && (e.shape.size() == 3 || e.shape.size() == 4)) {
        for (size_t d = 2; d < e.shape.size(); ++d)
          if (e.shape[d] != 1)
            return InvalidArgumentError(file_.path() + ": tensor " + e.name + " has shape " +
                                        mesh::ShapeToString(e.shape) + ", not a 1x1 convolution's");
        Add("vae", name, e, Op::kSqueeze);
      } else {
        Add("vae", name, e);
      }
    }
    return OkStatus();
  }

  // create_diffusers_clip_model_from_ldm's choice of branch for a text
  // encoder of `hidden` width, then its conversion.
  Status Text(const std::string& component, const models::ClipTextConfig& c) {
    auto width_is = [&](const char* key) {
      const SafetensorsEntry* e = file_.Find(key);
      return e && !e->shape.empty() && e->shape.back() == c.hidden_size;
    };
    if (file_.Find(kClipKey) || width_is(kClipSdxlKey)) return Clip(component);
    if (file_.Find(kOpenClipKey)) return OpenClip(component, kSd2Prefix, c);
    if (width_is(kOpenClipSdxlKey)) return OpenClip(component, "conditioner.embedders.1.model.", c);
    if (file_.Find(kOpenClipRefinerKey)) return OpenClip(component, "conditioner.embedders.0.model.", c);
    return InvalidArgumentError(file_.path() + ": no text encoder for " + component + " (hidden size " +
                                std::to_string(c.hidden_size) + "): looked for " + kClipKey + ", " + kClipSdxlKey +
                                " or " + kOpenClipSdxlKey + " of that width, or " + kOpenClipKey);
  }

 private:
  Status Clip(const std::string& component) {
    for (const SafetensorsEntry& e : file_.entries())
      for (const char* p : {"cond_stage_model.transformer.", "conditioner.embedders.0.transformer."})
        if (StartsWith(e.name, p)) Add(component, e.name.substr(strlen(p)), e);
    return OkStatus();
  }

  Status OpenClip(const std::string& component, const std::string& prefix, const models::ClipTextConfig& c) {
    const SafetensorsEntry* proj = file_.Find(prefix + "text_projection");
    const int64_t d = proj && !proj->shape.empty() ? proj->shape[0] : c.hidden_size;
    static const std::vector<std::pair<std::string, std::string>> kLayers = {
        {"positional_embedding", "text_model.embeddings.position_embedding.weight"},
        {"token_embedding.weight", "text_model.embeddings.token_embedding.weight"},
        {"ln_final.weight", "text_model.final_layer_norm.weight"},
        {"ln_final.bias", "text_model.final_layer_norm.bias"},
        {"text_projection", "text_projection.weight"}};
    for (const auto& [ldm, name] : kLayers) {
      const SafetensorsEntry* e = file_.Find(prefix + ldm);
      if (!e || Sd2Ignored(e->name)) continue;
      if (ldm == "text_projection" && e->shape.size() != 2)
        return InvalidArgumentError(file_.path() + ": tensor " + e->name + " has shape " +
                                    mesh::ShapeToString(e->shape) + ", not a matrix");
      Add(component, name, *e, ldm == "text_projection" ? Op::kTranspose : Op::kCopy);
    }
    const std::string tp = prefix + "transformer.";
    for (const SafetensorsEntry& e : file_.entries()) {
      if (!StartsWith(e.name, tp) || Sd2Ignored(e.name)) continue;
      const std::string name = OpenClipName(e.name.substr(tp.size()));
      const bool w = EndsWith(e.name, ".in_proj_weight"), b = EndsWith(e.name, ".in_proj_bias");
      if (!w && !b) {
        Add(component, name, e);
        continue;
      }
      const int64_t rows = e.shape.empty() ? 0 : e.shape[0];
      if ((w && e.shape.size() != 2) || (b && e.shape.size() != 1) || rows < 2 * d)
        return InvalidArgumentError(file_.path() + ": tensor " + e.name + " has shape " + mesh::ShapeToString(e.shape) +
                                    ", not a fused q/k/v projection of width " + std::to_string(d));
      const char* kind = w ? ".weight" : ".bias";
      Add(component, name + ".q_proj" + kind, e, Op::kRows, 0, d);
      Add(component, name + ".k_proj" + kind, e, Op::kRows, d, 2 * d);
      Add(component, name + ".v_proj" + kind, e, Op::kRows, 2 * d, rows);
    }
    return OkStatus();
  }

  const SafetensorsFile& file_;
  LdmMapping* out_;
  std::set<std::string> used_;
  std::map<std::string, size_t> index_;
};

bool HasPrefix(const SafetensorsFile& f, std::string_view prefix) {
  for (const SafetensorsEntry& e : f.entries())
    if (StartsWith(e.name, prefix)) return true;
  return false;
}

// The layout a built-in architecture's checkpoints have.
const char* ArchLayout(const std::string& arch) {
  if (arch == "sd21") return "sd2";
  if (arch == "sdxl") return "sdxl";
  return "sd1";
}
const char* LayoutKey(CheckpointLayout l) {
  return l == CheckpointLayout::kSd1 ? "sd1" : l == CheckpointLayout::kSd2 ? "sd2" : "sdxl";
}

// diffusers' legacy rule for SD 2.x: a global_step of 875000 is SD 2.x base,
// epsilon. The step as an integer tensor of one element; -1 when absent.
int64_t GlobalStep(const SafetensorsFile& f) {
  const SafetensorsEntry* e = f.Find("global_step");
  if (!e || (e->dtype != "I64" && e->dtype != "I32") || mesh::NumElements(e->shape) != 1) return -1;
  std::ifstream in(f.path(), std::ios::binary);
  uint64_t header = 0;
  if (!in.read(reinterpret_cast<char*>(&header), 8)) return -1;
  in.seekg(static_cast<std::streamoff>(8 + header + e->begin));
  int64_t v = 0;
  if (e->dtype == "I64") {
    if (!in.read(reinterpret_cast<char*>(&v), 8)) return -1;
  } else {
    int32_t v32 = 0;
    if (!in.read(reinterpret_cast<char*>(&v32), 4)) return -1;
    v = v32;
  }
  return v;
}

// The transform of one mapped tensor, on an array read as `dtype`.
StatusOr<mesh::Array> Apply(const MappedTensor& t, mesh::Array a) {
  switch (t.op) {
    case Op::kCopy:
      return a;
    case Op::kSqueeze:
      return a.Reshape(t.shape);
    case Op::kRows: {
      const int64_t row = a.num_elements() / std::max<int64_t>(a.dim(0), 1);
      mesh::Array out = mesh::Array::Host(a.dtype(), t.shape);
      const size_t es = mesh::DTypeSize(a.dtype());
      std::memcpy(out.mutable_raw(), static_cast<const char*>(a.raw()) + t.row_begin * row * es,
                  static_cast<size_t>(out.num_elements()) * es);
      return out;
    }
    case Op::kTranspose: {
      const int64_t r = a.dim(0), c = a.dim(1);
      mesh::Array out = mesh::Array::Host(a.dtype(), t.shape);
      const size_t es = mesh::DTypeSize(a.dtype());
      const char* src = static_cast<const char*>(a.raw());
      char* dst = static_cast<char*>(out.mutable_raw());
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) std::memcpy(dst + (j * r + i) * es, src + (i * c + j) * es, es);
      return out;
    }
  }
  return InternalError("unknown op");
}

}  // namespace

std::string LayoutDescription(CheckpointLayout layout) {
  switch (layout) {
    case CheckpointLayout::kSd1:
      return "an SD 1.x checkpoint (CLIP under cond_stage_model.transformer.)";
    case CheckpointLayout::kSd2:
      return "an SD 2.x checkpoint (OpenCLIP under cond_stage_model.model.)";
    case CheckpointLayout::kSdxl:
      return "an SDXL checkpoint (text encoders under conditioner.embedders.0 and .1)";
  }
  return "";
}

Status RefusePickle(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  const std::string refuse =
      ": tpumesh reads safetensors checkpoints only and never loads a pickle (loading one can run code); "
      "convert it to .safetensors first";
  for (const char* p : {".ckpt", ".pt", ".pth", ".bin", ".pkl", ".pickle"})
    if (ext == p) return InvalidArgumentError(path + ": a pickle checkpoint (" + ext + ")" + refuse);
  // What cannot be opened (a FIFO, a missing file) is refused with its own
  // line where the checkpoint is opened.
  StatusOr<InputFile> in = InputFile::Open(path);
  unsigned char magic[4] = {0, 0, 0, 0};
  if (!in.ok() || in->size() < 4 || !in->ReadAt(magic, 4, 0).ok()) return OkStatus();
  if (magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4)
    return InvalidArgumentError(path + ": a zip archive (torch.save's pickle format)" + refuse);
  if (magic[0] == 0x80 && magic[1] >= 2 && magic[1] <= 5)
    return InvalidArgumentError(path + ": a pickle (protocol " + std::to_string(magic[1]) + ")" + refuse);
  return OkStatus();
}

StatusOr<CheckpointLayout> DetectLayout(const SafetensorsFile& f) {
  const bool unet = HasPrefix(f, kUnetPrefix);
  const bool vae = HasPrefix(f, "first_stage_model.") || HasPrefix(f, "vae.");
  const std::string looked =
      ": looked for the UNet under model.diffusion_model., the VAE under first_stage_model. (or vae.) and the "
      "text encoder under cond_stage_model.transformer. (SD 1.x), cond_stage_model.model. (SD 2.x) or "
      "conditioner.embedders.0.transformer. with conditioner.embedders.1.model. (SDXL)";
  if (f.Find(kOpenClipRefinerKey) && !f.Find(kClipSdxlKey))
    return InvalidArgumentError(f.path() + ": an SDXL refiner checkpoint (conditioner.embedders.0.model.*); "
                                "tpumesh runs SD 1.x, SD 2.x and SDXL base");
  if (!unet || !vae) {
    if (f.Find("conv_in.weight") || HasPrefix(f, "down_blocks.") || HasPrefix(f, "text_model."))
      return InvalidArgumentError(f.path() + ": the weights of one diffusers component, not a single-file "
                                  "checkpoint; convert the diffusers folder instead" + looked);
    return InvalidArgumentError(f.path() + ": no known single-file layout (" +
                                std::string(!unet ? "no model.diffusion_model.*" : "no first_stage_model.* or vae.*") +
                                ")" + looked);
  }
  if (f.Find(kClipKey)) return CheckpointLayout::kSd1;
  if (f.Find(kOpenClipKey)) return CheckpointLayout::kSd2;
  if (f.Find(kClipSdxlKey) && f.Find(kOpenClipSdxlKey)) return CheckpointLayout::kSdxl;
  return InvalidArgumentError(f.path() + ": no known text encoder (found neither " + kClipKey + ", " + kOpenClipKey +
                              " nor " + kClipSdxlKey + " with " + kOpenClipSdxlKey + ")" + looked);
}

StatusOr<LdmMapping> MapLdmCheckpoint(const SafetensorsFile& file, const DiffusersTexts& configs) {
  LdmMapping out;
  Mapper m(file, &out);
  for (const auto& [component, text] : configs.configs) {
    const std::string origin = configs.origin + ": " + component + "/config.json";
    if (component == "unet") {
      TPUMESH_ASSIGN_OR_RETURN(models::UNetConfig c, models::ParseUNetConfig(text, origin));
      TPUMESH_RETURN_IF_ERROR(m.Unet(c));
    } else if (component == "vae") {
      TPUMESH_ASSIGN_OR_RETURN(models::VaeConfig c, models::ParseVaeConfig(text, origin));
      TPUMESH_RETURN_IF_ERROR(m.Vae(c));
    } else {
      TPUMESH_ASSIGN_OR_RETURN(models::ClipTextConfig c, models::ParseClipTextConfig(text, origin));
      TPUMESH_RETURN_IF_ERROR(m.Text(component, c));
    }
  }
  for (const SafetensorsEntry& e : file.entries())
    if (!m.used().count(e.name)) out.unused.push_back(e.name);
  return out;
}

StatusOr<SingleFilePlan> PlanSingleFile(const SafetensorsFile& file, const SingleFileOptions& options) {
  const std::string& checkpoint = file.path();
  if (!options.arch.empty() && !options.config_dir.empty())
    return InvalidArgumentError("--arch and --config: give one (the architecture's configs or the folder's)");
  if (!options.prediction_type.empty() && options.prediction_type != "epsilon" &&
      options.prediction_type != "v_prediction" && options.prediction_type != "sample")
    return InvalidArgumentError("--prediction-type must be epsilon, v_prediction or sample, not '" +
                                options.prediction_type + "'");
  TPUMESH_ASSIGN_OR_RETURN(CheckpointLayout layout, DetectLayout(file));

  // The configs, tokenizers and scheduler.
  SingleFilePlan plan;
  plan.layout = layout;
  DiffusersTexts& d = plan.texts;
  std::string needs;  // whose configs need the tensors, for errors
  if (!options.config_dir.empty()) {
    TPUMESH_ASSIGN_OR_RETURN(d, ReadDiffusersTexts(options.config_dir));
    const bool sdxl = !d.sdxl_evidence.empty();
    if (sdxl != (layout == CheckpointLayout::kSdxl))
      return InvalidArgumentError("--config " + options.config_dir + ": " +
                                  (sdxl ? "an SDXL folder (" + d.sdxl_evidence + ")" : std::string("not SDXL")) +
                                  " but " + checkpoint + " is " + LayoutDescription(layout));
    needs = options.config_dir + "'s ";
  } else {
    const std::string name = !options.arch.empty()                ? options.arch
                             : layout == CheckpointLayout::kSd1 ? "sd15"
                             : layout == CheckpointLayout::kSd2 ? "sd21"
                                                                : "sdxl";
    TPUMESH_ASSIGN_OR_RETURN(models::Architecture arch, models::BuiltinArchitecture(name));
    if (std::string(ArchLayout(name)) != LayoutKey(layout))
      return InvalidArgumentError("--arch " + name + ": " + checkpoint + " is " + LayoutDescription(layout) +
                                  ", not the layout of " + arch.description);
    d.origin = "built-in " + name;
    d.model_index = arch.model_index;
    d.scheduler = arch.scheduler;
    if (!arch.text_encoder_2.empty()) d.sdxl_evidence = "built-in sdxl";
    d.configs.emplace_back("text_encoder", arch.text_encoder);
    if (!arch.text_encoder_2.empty()) d.configs.emplace_back("text_encoder_2", arch.text_encoder_2);
    d.configs.emplace_back("unet", arch.unet);
    d.configs.emplace_back("vae", arch.vae);
    if (name == "tiny") {
      d.texts = {{"tokenizer/vocab.json", std::string(embedded::TinyTokenizer_vocab_json())},
                 {"tokenizer/merges.txt", std::string(embedded::TinyTokenizer_merges_txt())},
                 {"tokenizer/special_tokens_map.json", std::string(embedded::TinyTokenizer_special_tokens_map_json())},
                 {"tokenizer/tokenizer_config.json", std::string(embedded::TinyTokenizer_tokenizer_config_json())}};
    } else {
      TPUMESH_ASSIGN_OR_RETURN(d.texts, OpenAiClipTokenizerTexts("tokenizer", name == "sd21" ? "!" : "<|endoftext|>"));
      if (name == "sdxl") {
        TPUMESH_ASSIGN_OR_RETURN(auto t2, OpenAiClipTokenizerTexts("tokenizer_2", "!"));
        d.texts.insert(d.texts.end(), t2.begin(), t2.end());
      }
    }
    // diffusers' infer_diffusers_model_type: a UNet of 9 input channels is
    // an inpainting model (stable-diffusion-inpainting, -2-inpainting, SDXL
    // inpainting 0.1): the architecture's configs with in_channels 9 (SD 2.x:
    // 512 px) and an ...InpaintPipeline; 8 is InstructPix2Pix.
    const SafetensorsEntry* conv_in = file.Find(std::string(kUnetPrefix) + "input_blocks.0.0.weight");
    const int64_t in_channels = conv_in && conv_in->shape.size() == 4 ? conv_in->shape[1] : 4;
    if (in_channels == 8)
      return UnimplementedError(checkpoint + ": an InstructPix2Pix checkpoint (a UNet of 8 input channels); "
                                "tpumesh runs text-to-image, img2img and inpainting models");
    const bool inpainting = in_channels == 9;
    if (inpainting) {
      for (auto& [component, text] : d.configs)
        if (component == "unet") {
          auto j = nlohmann::json::parse(text);
          j["in_channels"] = 9;
          if (layout == CheckpointLayout::kSd2) j["sample_size"] = 64;
          text = j.dump(2);
        }
      auto j = nlohmann::json::parse(d.model_index);
      std::string c = j["_class_name"];
      j["_class_name"] = c.substr(0, c.size() - std::string("Pipeline").size()) + "InpaintPipeline";
      d.model_index = j.dump(2);
    }
    // diffusers' rule for SD 2.x: v-prediction unless the step says base
    // (an inpainting SD 2.x file is not "v2" to it: epsilon).
    if (layout == CheckpointLayout::kSd2 && options.prediction_type.empty()) {
      auto j = nlohmann::json::parse(d.scheduler);
      j["prediction_type"] = inpainting || GlobalStep(file) == 875000 ? "epsilon" : "v_prediction";
      d.scheduler = j.dump(2);
    }
    needs = "the built-in " + name + "'s ";
  }
  if (!options.prediction_type.empty()) {
    auto j = nlohmann::json::parse(d.scheduler, nullptr, false);
    if (!j.is_object()) return InvalidArgumentError(d.origin + ": scheduler/scheduler_config.json: not a JSON object");
    j["prediction_type"] = options.prediction_type;
    d.scheduler = j.dump(2);
  }

  // Map, then check every parameter against the configs' manifests and the
  // whole model against the loader, before the output is created.
  TPUMESH_ASSIGN_OR_RETURN(LdmMapping mapping, MapLdmCheckpoint(file, d));
  std::map<std::string, const MappedTensor*> by_name;
  for (const MappedTensor& t : mapping.tensors) by_name[t.component + "/" + t.name] = &t;
  std::map<std::string, std::vector<const MappedTensor*>> to_write;
  plan.unused = mapping.unused;
  TPUMESH_RETURN_IF_ERROR(CheckModelBuilds(
      d, [&](const std::string& component, const std::vector<models::ParamSpec>& manifest) -> Status {
        std::vector<const MappedTensor*>& list = to_write[component];
        list.clear();
        for (const models::ParamSpec& p : manifest) {
          auto it = by_name.find(component + "/" + p.name);
          if (it == by_name.end())
            return NotFoundError(checkpoint + ": no tensor maps to " + component + "/" + p.name + " (" + needs +
                                 component + "/config.json needs it, shape " + mesh::ShapeToString(p.shape) + ")");
          const MappedTensor& t = *it->second;
          const SafetensorsEntry* e = file.Find(t.source);
          if (!IsFloat(e->dtype))
            return InvalidArgumentError(checkpoint + ": tensor " + t.source + " is " + e->dtype +
                                        ", not a float (F32, F16, BF16)");
          if (t.shape != p.shape)
            return InvalidArgumentError(checkpoint + ": tensor " + t.source + " (" + component + "/" + p.name +
                                        ") has shape " + mesh::ShapeToString(t.shape) + " but " + needs + component +
                                        "/config.json needs " + mesh::ShapeToString(p.shape) +
                                        (options.config_dir.empty() ? "; --config DIR takes other sizes" : ""));
          list.push_back(&t);
        }
        // Read in file order.
        std::sort(list.begin(), list.end(), [&](const MappedTensor* a, const MappedTensor* b) {
          return std::pair(file.Find(a->source)->begin, a->row_begin) <
                 std::pair(file.Find(b->source)->begin, b->row_begin);
        });
        return OkStatus();
      }));
  for (const auto& [component, config] : d.configs) {
    auto& list = plan.components.emplace_back(component, std::vector<MappedTensor>()).second;
    for (const MappedTensor* t : to_write[component]) list.push_back(*t);
  }
  return plan;
}

StatusOr<ConvertStats> ConvertSingleFile(const std::string& checkpoint, const std::string& output, mesh::DType dtype,
                                         const SingleFileOptions& options,
                                         const std::function<void(const std::string&, int, int)>& progress) {
  if (dtype != mesh::DType::kF32 && dtype != mesh::DType::kBF16)
    return InvalidArgumentError("--dtype must be f32 or bf16");
  TPUMESH_RETURN_IF_ERROR(RefusePickle(checkpoint));
  std::error_code ec;
  if (!fs::exists(checkpoint, ec)) return NotFoundError(checkpoint + ": no such file");
  if (!fs::is_regular_file(checkpoint, ec)) return InvalidArgumentError(checkpoint + ": not a regular file");
  TPUMESH_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(checkpoint));
  TPUMESH_ASSIGN_OR_RETURN(SingleFilePlan plan, PlanSingleFile(file, options));
  const DiffusersTexts& d = plan.texts;

  TPUMESH_ASSIGN_OR_RETURN(std::unique_ptr<ModelFileWriter> out, ModelFileWriter::Create(output));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("model_index.json", d.model_index));
  TPUMESH_RETURN_IF_ERROR(out->WriteText("scheduler/scheduler_config.json", d.scheduler));
  for (const auto& [path, text] : d.texts) TPUMESH_RETURN_IF_ERROR(out->WriteText(path, text));
  ConvertStats stats;
  std::set<std::string> written_sources;
  for (size_t c = 0; c < d.configs.size(); ++c) {
    const auto& [component, config] = d.configs[c];
    TPUMESH_RETURN_IF_ERROR(out->WriteText(component + "/config.json", config));
    const std::vector<MappedTensor>& list = plan.components[c].second;
    int done = 0;
    for (const MappedTensor& tensor : list) {
      const MappedTensor* t = &tensor;
      TPUMESH_ASSIGN_OR_RETURN(mesh::Array raw, file.Read(t->source, dtype));
      TPUMESH_RETURN_IF_ERROR(CheckFiniteTensor(checkpoint + ": tensor " + t->source, raw));
      TPUMESH_ASSIGN_OR_RETURN(mesh::Array a, Apply(*t, std::move(raw)));
      TPUMESH_RETURN_IF_ERROR(out->WriteTensor(component, t->name, a, dtype));
      written_sources.insert(t->source);
      ++stats.tensors;
      stats.parameters += a.num_elements();
      stats.bytes_written += a.size_bytes();
      if (progress) progress(component, ++done, static_cast<int>(list.size()));
    }
  }
  TPUMESH_RETURN_IF_ERROR(out->Commit());
  for (const SafetensorsEntry& e : file.entries())
    if (!written_sources.count(e.name)) {
      ++stats.unused;
      if (stats.unused_examples.size() < 3) stats.unused_examples.push_back(e.name);
    }
  return stats;
}

}  // namespace tpumesh::pipeline
