#include "pipeline/lora.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>

#include "io/safetensors.h"
#include "kernels/bf16.h"
#include "nlohmann/json.hpp"
#include "oneapi/tbb/blocked_range.h"
#include "oneapi/tbb/parallel_for.h"

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DType;
using mesh::Shape;

bool StartsWith(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }
bool EndsWith(const std::string& s, std::string_view t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
std::string Strip(const std::string& s, std::string_view tail) { return s.substr(0, s.size() - tail.size()); }

std::string Underscored(std::string s) {
  for (char& c : s)
    if (c == '.') c = '_';
  return s;
}

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Reads a whole number at s[*pos] (advancing), or -1.
int ReadIndex(const std::string& s, size_t* pos) {
  size_t p = *pos;
  int v = 0;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p])) && p - *pos < 6) v = v * 10 + (s[p++] - '0');
  if (p == *pos) return -1;
  *pos = p;
  return v;
}

// A resnet's inner module in the SGM layout -> diffusers (underscored).
std::string SgmResnet(const std::string& rest) {
  if (rest == "in_layers_2") return "conv1";
  if (rest == "out_layers_3") return "conv2";
  if (rest == "emb_layers_1") return "time_emb_proj";
  if (rest == "skip_connection") return "conv_shortcut";
  return rest;
}

// A kohya UNet path in the SGM (LDM) layout -> the diffusers path,
// underscored, as diffusers' _maybe_map_sgm_blocks_to_diffusers and
// _convert_unet_lora_key map it (two candidates "A|B" where the layout
// alone cannot tell); nullopt when `raw` is not SGM.
// lpb: the UNet's layers_per_block (the up blocks have lpb + 1 layers).
std::optional<std::string> SgmToDiffusers(const std::string& raw, int lpb) {
  static const std::map<std::string, std::string> kTop = {
      {"input_blocks_0_0", "conv_in"},          {"out_2", "conv_out"},
      {"time_embed_0", "time_embedding_linear_1"}, {"time_embed_2", "time_embedding_linear_2"},
      {"label_emb_0_0", "add_embedding_linear_1"}, {"label_emb_0_2", "add_embedding_linear_2"}};
  if (auto it = kTop.find(raw); it != kTop.end()) return it->second;
  const bool in = StartsWith(raw, "input_blocks_"), mid = StartsWith(raw, "middle_block_"),
             out = StartsWith(raw, "output_blocks_");
  if (!in && !mid && !out) return std::nullopt;
  if (lpb <= 0) return raw;  // unresolvable: reported as an unknown module
  size_t pos = in ? 13 : mid ? 13 : 14;
  const int i = ReadIndex(raw, &pos);
  int j = 0;
  if (!mid) {
    if (i < 0 || pos >= raw.size() || raw[pos] != '_') return raw;
    ++pos;
    j = ReadIndex(raw, &pos);
  }
  if (i < 0 || j < 0 || pos >= raw.size() || raw[pos] != '_') return raw;
  const std::string rest = raw.substr(pos + 1);
  const std::string l = std::to_string(in ? (i - 1) % (lpb + 1) : i % (lpb + 1));
  if (in) {
    if (i < 1) return raw;
    const std::string b = "down_blocks_" + std::to_string((i - 1) / (lpb + 1)) + "_";
    if (rest == "op") return b + "downsamplers_0_conv";
    if (j == 0) return b + "resnets_" + l + "_" + SgmResnet(rest);
    if (j == 1) return b + "attentions_" + l + "_" + rest;
    return raw;
  }
  if (mid) {
    if (i == 0) return "mid_block_resnets_0_" + SgmResnet(rest);
    if (i == 1) return "mid_block_attentions_0_" + rest;
    if (i == 2) return "mid_block_resnets_1_" + SgmResnet(rest);
    return raw;
  }
  const std::string b = "up_blocks_" + std::to_string(i / (lpb + 1)) + "_";
  if (j == 0) return b + "resnets_" + l + "_" + SgmResnet(rest);
  // In an up block without attentions (SD 1.x's first) the upsampler is
  // layer 1: diffusers maps it to attentions (no such module); tried second.
  if (j == 1) return b + "attentions_" + l + "_" + rest + "|" + b + "upsamplers_0_" + rest;
  if (j == 2) return b + "upsamplers_0_" + rest;
  return raw;
}

// The UNet's layers_per_block, from its weight names (the resnets of
// down_blocks.0); 0 when it has none.
int LayersPerBlock(const std::map<std::string, Shape>& unet) {
  std::set<int> seen;
  for (const auto& [name, shape] : unet) {
    if (!StartsWith(name, "down_blocks.0.resnets.")) continue;
    size_t pos = 22;
    const int l = ReadIndex(name, &pos);
    if (l >= 0) seen.insert(l);
  }
  return static_cast<int>(seen.size());
}

// A LoRA module as the file names it, with its keys.
struct Entry {
  std::string component;  // unet, text_encoder, text_encoder_2
  std::string path;       // kohya: the underscored path; diffusers: the dotted module path
  std::string down, up, alpha;
};

// The text encoders' attention projections in the older diffusers names.
std::string OldAttention(const std::string& component, const std::string& head) {
  // head ends with to_q / to_k / to_v / to_out (".processor" removed)
  const size_t dot = head.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : head.substr(0, dot + 1);
  const std::string last = head.substr(dot == std::string::npos ? 0 : dot + 1);
  if (component == "unet") return last == "to_out" ? parent + "to_out.0" : head;
  static const std::map<std::string, std::string> kText = {
      {"to_q", "q_proj"}, {"to_k", "k_proj"}, {"to_v", "v_proj"}, {"to_out", "out_proj"}};
  auto it = kText.find(last);
  return it == kText.end() ? head : parent + it->second;
}

std::string RemoveProcessor(std::string s) {
  for (size_t p; (p = s.find(".processor.")) != std::string::npos;) s.erase(p, 10);
  return s;
}

// Sorts a file's keys into modules. `file` prefixes messages.
StatusOr<std::map<std::string, Entry>> GroupKeys(const SafetensorsFile& st, const std::string& file, bool* kohya) {
  auto bad = [&](const std::string& key, const std::string& why) {
    return InvalidArgumentError(file + ": key " + key + ": " + why);
  };
  auto is_kohya = [](const std::string& k) {
    return StartsWith(k, "lora_unet_") || StartsWith(k, "lora_te_") || StartsWith(k, "lora_te1_") ||
           StartsWith(k, "lora_te2_");
  };
  int kohya_keys = 0;
  for (const auto& e : st.entries()) kohya_keys += is_kohya(e.name);
  *kohya = kohya_keys == static_cast<int>(st.entries().size());
  if (kohya_keys > 0 && !*kohya)
    for (const auto& e : st.entries())
      if (!is_kohya(e.name))
        return bad(e.name, "unknown key in a kohya LoRA (every key starts with lora_unet_, lora_te_, lora_te1_ or "
                           "lora_te2_)");
  std::map<std::string, Entry> modules;
  auto slot = [&](const std::string& component, const std::string& path) -> Entry& {
    Entry& m = modules[component + "/" + path];
    m.component = component;
    m.path = path;
    return m;
  };
  auto set = [&](std::string* where, const std::string& key) -> Status {
    if (!where->empty()) return bad(key, "names the same module as " + *where);
    *where = key;
    return OkStatus();
  };
  for (const auto& e : st.entries()) {
    const std::string& key = e.name;
    if (key.find("dora_scale") != std::string::npos || key.find("lora_magnitude_vector") != std::string::npos)
      return bad(key, "a DoRA LoRA (magnitude vectors), which tpumesh does not fuse");
    if (*kohya) {
      const size_t dot = key.find('.');
      if (dot == std::string::npos) return bad(key, "not a kohya LoRA key (NAME.lora_down.weight, .lora_up.weight, .alpha)");
      const std::string name = key.substr(0, dot), suffix = key.substr(dot + 1);
      std::string component, path;
      for (auto [prefix, c] : {std::pair{"lora_unet_", "unet"}, {"lora_te1_", "text_encoder"},
                               {"lora_te2_", "text_encoder_2"}, {"lora_te_", "text_encoder"}})
        if (StartsWith(name, prefix)) {
          component = c;
          path = name.substr(std::string_view(prefix).size());
          break;
        }
      Entry& m = slot(component, path);
      if (suffix == "lora_down.weight") {
        TPUMESH_RETURN_IF_ERROR(set(&m.down, key));
      } else if (suffix == "lora_up.weight") {
        TPUMESH_RETURN_IF_ERROR(set(&m.up, key));
      } else if (suffix == "alpha") {
        TPUMESH_RETURN_IF_ERROR(set(&m.alpha, key));
      } else {
        return bad(key, "unknown kohya LoRA key (expected NAME.lora_down.weight, .lora_up.weight or .alpha)");
      }
      continue;
    }
    std::string component;
    for (const char* c : {"text_encoder_2", "text_encoder", "unet"})
      if (StartsWith(key, std::string(c) + ".")) {
        component = c;
        break;
      }
    if (component.empty())
      return bad(key, "unknown LoRA key: neither kohya (lora_unet_, lora_te_, lora_te1_, lora_te2_) nor diffusers "
                      "(unet., text_encoder., text_encoder_2.)");
    const std::string rest = RemoveProcessor(key.substr(component.size() + 1));
    if (EndsWith(rest, ".lora_B.bias"))
      return bad(key, "a LoRA with biases (peft lora_bias), which tpumesh does not fuse");
    bool down = false;
    std::string module;
    // The longest suffix first: "_lora.down.weight" before ".lora.down.weight".
    static const std::vector<std::tuple<std::string, bool, bool>> kForms = {
        {"_lora.down.weight", true, true},          {"_lora.up.weight", false, true},
        {".lora_A.weight", true, false},             {".lora_B.weight", false, false},
        {".lora_linear_layer.down.weight", true, false}, {".lora_linear_layer.up.weight", false, false},
        {".lora.down.weight", true, false},          {".lora.up.weight", false, false}};
    for (const auto& [tail, is_down, attention] : kForms) {
      if (!EndsWith(rest, tail)) continue;
      down = is_down;
      module = Strip(rest, tail);
      if (attention) module = OldAttention(component, module);
      break;
    }
    if (module.empty())
      return bad(key, "unknown LoRA key (expected MODULE.lora_A.weight / .lora_B.weight, or diffusers' older "
                      ".lora.down/.up, .lora_linear_layer.down/.up, .to_q_lora.down/.up names)");
    Entry& m = slot(component, module);
    TPUMESH_RETURN_IF_ERROR(set(down ? &m.down : &m.up, key));
  }
  return modules;
}

// One component's diffusers metadata (peft LoraConfig fields).
struct Meta {
  bool present = false;
  int r = 8;
  double alpha = 8;
  bool rslora = false;
  std::vector<std::pair<std::string, double>> rank_pattern, alpha_pattern;
};

// Whether peft's pattern `key` selects the module `name` ("^" anchors at the
// start; otherwise the name is it or ends with "." + it).
bool PatternMatches(std::string key, const std::string& name) {
  if (!key.empty() && key[0] == '^') return name == key.substr(1);
  return name == key || EndsWith(name, "." + key);
}

std::optional<double> FindPattern(const std::vector<std::pair<std::string, double>>& patterns,
                                  const std::vector<std::string>& names) {
  for (const auto& [key, v] : patterns)
    for (const std::string& n : names)
      if (PatternMatches(key, n)) return v;
  return std::nullopt;
}

StatusOr<std::map<std::string, Meta>> ReadMeta(const SafetensorsFile& st, const std::string& file) {
  std::map<std::string, Meta> out;
  auto it = st.metadata().find("lora_adapter_metadata");
  if (it == st.metadata().end()) return out;
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError(file + ": __metadata__ lora_adapter_metadata: " + why);
  };
  const auto j = nlohmann::json::parse(it->second, nullptr, false);
  if (!j.is_object()) return bad("not a JSON object");
  for (const auto& item : j.items()) {
    // Named copies, not structured bindings: the lambdas below capture them
    // (clang 14 cannot capture a structured binding).
    const std::string k = item.key();
    const nlohmann::json& v = item.value();
    std::string component;
    for (const char* c : {"text_encoder_2", "text_encoder", "unet"})
      if (StartsWith(k, std::string(c) + ".")) {
        component = c;
        break;
      }
    if (component.empty()) continue;
    Meta& m = out[component];
    m.present = true;
    const std::string field = k.substr(component.size() + 1);
    auto number = [&](double* where) -> Status {
      if (!v.is_number() || !std::isfinite(v.get<double>())) return bad(k + " is not a number");
      *where = v.get<double>();
      return OkStatus();
    };
    auto patterns = [&](std::vector<std::pair<std::string, double>>* where) -> Status {
      if (v.is_null()) return OkStatus();
      if (!v.is_object()) return bad(k + " is not an object");
      for (const auto& [pk, pv] : v.items()) {
        if (!pv.is_number() || !std::isfinite(pv.get<double>())) return bad(k + "[" + pk + "] is not a number");
        where->emplace_back(pk, pv.get<double>());
      }
      return OkStatus();
    };
    if (field == "r") {
      double r = 0;
      TPUMESH_RETURN_IF_ERROR(number(&r));
      if (r < 1 || r != std::floor(r) || r > 1e6) return bad(k + " is not a positive whole number");
      m.r = static_cast<int>(r);
    } else if (field == "lora_alpha") {
      TPUMESH_RETURN_IF_ERROR(number(&m.alpha));
    } else if (field == "use_rslora") {
      m.rslora = v.is_boolean() && v.get<bool>();
    } else if (field == "use_dora") {
      if (v.is_boolean() && v.get<bool>()) return bad(k + ": a DoRA LoRA, which tpumesh does not fuse");
    } else if (field == "rank_pattern") {
      TPUMESH_RETURN_IF_ERROR(patterns(&m.rank_pattern));
    } else if (field == "alpha_pattern") {
      TPUMESH_RETURN_IF_ERROR(patterns(&m.alpha_pattern));
    }
  }
  return out;
}

Status CheckFinite(const std::string& file, const std::string& key, const Array& a) {
  const float* v = a.data<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i)
    if (!std::isfinite(v[i]))
      return InvalidArgumentError(file + ": key " + key + ": holds NaN or Inf at index " + std::to_string(i));
  return OkStatus();
}

}  // namespace

StatusOr<LoraSpec> ParseLoraSpec(const std::string& text) {
  LoraSpec spec;
  std::error_code ec;
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || std::filesystem::exists(text, ec)) {
    spec.path = text;
  } else {
    spec.path = text.substr(0, colon);
    const std::string s = text.substr(colon + 1);
    char* end = nullptr;
    errno = 0;
    const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
      return InvalidArgumentError("--lora '" + text + "': '" + s +
                                  "' is not a scale (a finite number, as in FILE.safetensors:0.8), and no file '" +
                                  text + "' exists");
    spec.scale = v;
  }
  if (spec.path.empty()) return InvalidArgumentError("--lora '" + text + "': expected FILE[:SCALE]");
  return spec;
}

std::string LoraLabel(const LoraSpec& spec) {
  return std::filesystem::path(spec.path).filename().string() + ":" + Fmt(spec.scale);
}

StatusOr<LoraTargets> ReadLoraTargets(const ModelFile& file) {
  LoraTargets t;
  for (const char* component : {"unet", "text_encoder", "text_encoder_2"}) {
    if (!file.Has(std::string(component) + "/config.json")) continue;
    auto& out = t[component];
    TPUMESH_ASSIGN_OR_RETURN(std::vector<std::string> names, file.TensorNames(component));
    for (const std::string& name : names) {
      if (!EndsWith(name, ".weight") || name.find("embedding.weight") != std::string::npos) continue;
      TPUMESH_ASSIGN_OR_RETURN(TensorInfo info, file.Info(component, name));
      if (info.shape.size() == 2 || info.shape.size() == 4) out[name] = info.shape;
    }
  }
  return t;
}

StatusOr<LoraSet> LoraSet::Open(const std::vector<LoraSpec>& specs, const LoraTargets& targets) {
  LoraSet set;
  // Per component: the underscored module path (kohya) -> weight name; ""
  // where two modules underscore alike.
  std::map<std::string, std::map<std::string, std::string>> kohya_names;
  for (const auto& [component, weights] : targets)
    for (const auto& [w, shape] : weights) {
      const std::string module = Strip(w, ".weight");
      std::vector<std::string> forms = {Underscored(module)};
      if (StartsWith(module, "text_model.")) forms.push_back(Underscored(module.substr(11)));
      for (const std::string& f : forms) {
        auto [it, fresh] = kohya_names[component].emplace(f, w);
        if (!fresh && it->second != w) it->second.clear();
      }
    }
  const int lpb = targets.count("unet") ? LayersPerBlock(targets.at("unet")) : 0;

  for (const LoraSpec& spec : specs) {
    if (!std::isfinite(spec.scale)) return InvalidArgumentError("--lora " + spec.path + ": the scale is not finite");
    const std::string file = "--lora " + spec.path;
    auto opened = SafetensorsFile::Open(spec.path);
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kNotFound) return opened.status().WithContext("--lora");
      return InvalidArgumentError(file + ": not a LoRA safetensors file (" + opened.status().message() + ")");
    }
    const SafetensorsFile& st = *opened;
    if (st.entries().empty()) return InvalidArgumentError(file + ": holds no tensors");
    bool kohya = false;
    TPUMESH_ASSIGN_OR_RETURN(auto entries, GroupKeys(st, file, &kohya));
    TPUMESH_ASSIGN_OR_RETURN(auto meta, ReadMeta(st, file));
    Lora lora;
    lora.spec = spec;
    std::map<std::string, std::string> used;  // weight -> key
    std::map<std::string, int> with_alpha, modules_in;  // per component
    for (const auto& [id, e] : entries) {
      ++modules_in[e.component];
      if (!e.alpha.empty()) ++with_alpha[e.component];
    }
    for (const auto& [id, e] : entries) {
      const std::string& any = !e.down.empty() ? e.down : !e.up.empty() ? e.up : e.alpha;
      auto bad = [&](const std::string& key, const std::string& why) {
        return InvalidArgumentError(file + ": key " + key + ": " + why);
      };
      auto comp = targets.find(e.component);
      if (comp == targets.end())
        return bad(any, "the model has no " + e.component + " (a LoRA for another model family, e.g. SDXL's on SD?)");
      // The module's weight in the model.
      std::string weight;
      if (kohya) {
        std::string paths = e.path;
        if (e.component == "unet")
          if (auto sgm = SgmToDiffusers(e.path, lpb)) paths = *sgm;
        const auto& names = kohya_names[e.component];
        for (size_t begin = 0; weight.empty() && begin <= paths.size();) {
          const size_t bar = std::min(paths.find('|', begin), paths.size());
          auto it = names.find(paths.substr(begin, bar - begin));
          if (it != names.end() && it->second.empty())
            return bad(any, "names more than one module of the model's " + e.component);
          if (it != names.end()) weight = it->second;
          begin = bar + 1;
        }
      } else {
        for (const std::string& w : {e.path + ".weight", "text_model." + e.path + ".weight"})
          if (comp->second.count(w)) {
            weight = w;
            break;
          }
      }
      if (weight.empty())
        return bad(any, "no Linear or conv module of the model's " + e.component +
                            " has this name (a LoRA for another model?)");
      if (e.down.empty()) return bad(any, "has no down weight (" + (kohya ? std::string("lora_down") : "lora_A") + ") to pair with");
      if (e.up.empty()) return bad(any, "has no up weight (" + (kohya ? std::string("lora_up") : "lora_B") + ") to pair with");
      if (auto [it, fresh] = used.emplace(e.component + "/" + weight, e.down); !fresh)
        return bad(e.down, "modifies " + e.component + "/" + weight + " as " + it->second + " does");
      TPUMESH_ASSIGN_OR_RETURN(Array down, st.Read(e.down, DType::kF32));
      TPUMESH_ASSIGN_OR_RETURN(Array up, st.Read(e.up, DType::kF32));
      TPUMESH_RETURN_IF_ERROR(CheckFinite(file, e.down, down));
      TPUMESH_RETURN_IF_ERROR(CheckFinite(file, e.up, up));
      const Shape& w = comp->second.at(weight);
      const std::string where = "the model's " + e.component + "/" + weight + " " + mesh::ShapeToString(w);
      // Shapes: down [r, in(, kh, kw)], up [out, r(, 1, 1)].
      if (down.rank() != static_cast<int>(w.size()) || down.dim(0) < 1)
        return bad(e.down, "has shape " + mesh::ShapeToString(down.shape()) + ", which cannot be the down weight of " +
                               where + " (a LoRA for another model?)");
      if (up.rank() != static_cast<int>(w.size()))
        return bad(e.up, "has shape " + mesh::ShapeToString(up.shape()) + ", which cannot be the up weight of " +
                             where + " (a LoRA for another model?)");
      const int64_t rank = down.dim(0);
      if (up.dim(1) != rank)
        return bad(e.up, "has rank " + std::to_string(up.dim(1)) + " (shape " + mesh::ShapeToString(up.shape()) +
                             ") but its down weight " + e.down + " has rank " + std::to_string(rank) + " (shape " +
                             mesh::ShapeToString(down.shape()) + ")");
      bool fits = down.dim(1) == w[1] && up.dim(0) == w[0];
      if (w.size() == 4) fits = fits && down.dim(2) == w[2] && down.dim(3) == w[3] && up.dim(2) == 1 && up.dim(3) == 1;
      if (!fits)
        return bad(e.down, "down " + mesh::ShapeToString(down.shape()) + " and up " + mesh::ShapeToString(up.shape()) +
                               " do not fit " + where + " (a LoRA for another model?)");
      // alpha.
      double alpha = static_cast<double>(rank);
      double divisor = static_cast<double>(rank);
      if (kohya) {
        if (!e.alpha.empty()) {
          TPUMESH_ASSIGN_OR_RETURN(Array a, st.Read(e.alpha, DType::kF32));
          if (a.num_elements() != 1) return bad(e.alpha, "an alpha must be one number, not " + mesh::ShapeToString(a.shape()));
          TPUMESH_RETURN_IF_ERROR(CheckFinite(file, e.alpha, a));
          alpha = a.data<float>()[0];
        } else if (with_alpha[e.component] > 0) {
          return bad(e.down, "has no .alpha while other modules of " + e.component + " have one");
        }
      } else if (auto m = meta.find(e.component); m != meta.end() && m->second.present) {
        const std::string module = Strip(weight, ".weight");
        std::vector<std::string> names = {module};
        if (StartsWith(module, "text_model.")) names.push_back(module.substr(11));
        const double r = FindPattern(m->second.rank_pattern, names).value_or(m->second.r);
        if (r != static_cast<double>(rank))
          return bad(e.down, "has rank " + std::to_string(rank) + " but the file's lora_adapter_metadata gives " +
                                 Fmt(r) + " for it");
        alpha = FindPattern(m->second.alpha_pattern, names).value_or(m->second.alpha);
        if (m->second.rslora) divisor = std::sqrt(divisor);
      }
      Module mod;
      mod.component = e.component;
      mod.weight = weight;
      mod.key = e.down;
      const int64_t cols = down.num_elements() / rank;
      TPUMESH_ASSIGN_OR_RETURN(mod.down, down.Reshape({rank, cols}));
      TPUMESH_ASSIGN_OR_RETURN(mod.up, up.Reshape({up.dim(0), rank}));
      // peft: scaling = lora_alpha / r, then scale_layer multiplies it.
      mod.scaling = alpha / divisor * spec.scale;
      lora.modules.push_back(std::move(mod));
    }
    set.loras_.push_back(std::move(lora));
  }
  return set;
}

std::string LoraSet::Label() const {
  std::string s;
  for (const Lora& l : loras_) s += (s.empty() ? "" : ", ") + LoraLabel(l.spec);
  return s;
}

std::vector<std::string> LoraSet::Touched(const std::string& component) const {
  std::set<std::string> names;
  for (const Lora& l : loras_)
    for (const Module& m : l.modules)
      if (m.component == component) names.insert(m.weight);
  return {names.begin(), names.end()};
}

Status LoraSet::Fuse(const std::string& component, std::map<std::string, Array>* params) const {
  for (const Lora& l : loras_) {
    for (const Module& m : l.modules) {
      if (m.component != component) continue;
      auto it = params->find(m.weight);
      const int64_t out = m.up.dim(0), rank = m.down.dim(0), cols = m.down.dim(1);
      if (it == params->end() || it->second.num_elements() != out * cols || it->second.dim(0) != out)
        return InvalidArgumentError("--lora " + l.spec.path + ": key " + m.key + ": the model's " + component + "/" +
                                    m.weight + " is missing or has another shape than checked");
      Array& w = it->second;
      if (w.storage_users() > 1 || w.read_only()) {
        TPUMESH_ASSIGN_OR_RETURN(w, w.CopyTo(nullptr, "lora"));
      }
      const bool bf16 = w.dtype() == DType::kBF16;
      std::vector<float> down(m.down.data<float>(), m.down.data<float>() + rank * cols);
      std::vector<float> up(m.up.data<float>(), m.up.data<float>() + out * rank);
      if (bf16) {  // peft casts the LoRA to the layer's dtype
        for (float& v : down) v = kernels::RoundToBf16(v);
        for (float& v : up) v = kernels::RoundToBf16(v);
      }
      const float scaling = static_cast<float>(m.scaling);
      // Rows in parallel: each row's sums run in the same order whatever the
      // thread count, so the fused bits do not depend on it.
      std::atomic<int64_t> overflow{-1};
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, out, 8), [&](const tbb::blocked_range<int64_t>& rows) {
        std::vector<float> acc(static_cast<size_t>(cols));
        for (int64_t o = rows.begin(); o < rows.end(); ++o) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t r = 0; r < rank; ++r) {
            const float u = up[o * rank + r];
            const float* d = down.data() + r * cols;
            for (int64_t j = 0; j < cols; ++j) acc[j] += u * d[j];
          }
          bool finite = true;
          if (bf16) {
            auto* row = w.mutable_data<kernels::bf16>() + o * cols;
            for (int64_t j = 0; j < cols; ++j) {
              const float sum = kernels::Bf16ToF32(row[j]) + kernels::RoundToBf16(acc[j] * scaling);
              finite = finite && std::isfinite(sum);
              row[j] = kernels::F32ToBf16(sum);
            }
          } else {
            float* row = w.mutable_data<float>() + o * cols;
            for (int64_t j = 0; j < cols; ++j) row[j] += acc[j] * scaling;
            for (int64_t j = 0; j < cols; ++j) finite = finite && std::isfinite(row[j]);
          }
          if (!finite) overflow.store(o);
        }
      });
      if (overflow.load() >= 0)
        return InvalidArgumentError("--lora " + l.spec.path + ": key " + m.key + ": the fused " + component + "/" +
                                    m.weight + " overflows (NaN or Inf; a scale of " + Fmt(l.spec.scale) +
                                    " is too large for this LoRA)");
    }
  }
  return OkStatus();
}

}  // namespace tpumesh::pipeline
