#include "io/workload.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "base/input_file.h"
#include "base/json_text.h"
#include "base/printable.h"
#include "kernels/attention.h"
#include "kernels/conv2d.h"
#include "nlohmann/json.hpp"

namespace tpumesh::pipeline {
namespace {

using json = nlohmann::json;

// A layer's dimensions multiply into FLOP counts and byte sizes: each is
// bounded so that no product of a few of them overflows a double's exact
// integers or an int64 (2^24 per dimension, 2^40 bytes).
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxBytes = int64_t{1} << 40;

std::string Dims(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t v : d) s += (s.size() > 1 ? "," : "") + std::to_string(v);
  return s + "]";
}

// A layer's record before its figures: what it is, its name, its precision.
WorkloadLayer NewLayer(const char* op, const char* type, const std::string& name, kernels::Precision p) {
  WorkloadLayer l;
  l.record.name = op;
  l.record.type = type;
  l.record.module = name;
  l.record.precision = p;
  return l;
}

WorkloadLayer MatmulLayer(const std::string& name, int64_t m, int64_t n, int64_t k, kernels::Precision p) {
  WorkloadLayer l = NewLayer("matmul", "matmul", name, p);
  mesh::OpRecord& r = l.record;
  r.shape = "a" + Dims({m, k}) + " b" + Dims({k, n});
  kernels::OpCost c;
  c.flops = 2.0 * static_cast<double>(m) * n * k;
  c.bytes_read = 4.0 * (static_cast<double>(m) * k + static_cast<double>(k) * n);
  c.bytes_written = 4.0 * static_cast<double>(m) * n;
  r.cost = c;
  r.mxu = {{m, n, k, 1, 4.0 * m * k, 4.0 * k * n, 4.0 * m * n}};
  return l;
}

// The most rows (M) a layer's matmul may have: a conv's batch x output
// pixels, which three dimensions of up to 2^24 would take to 2^72, past an
// int64. With N and K at most 2^44, every FLOP count, cycle count and byte
// count the cost model forms stays a finite double.
constexpr double kMaxGemmRows = 1099511627776.0;  // 2^40

// CheckConv2d's rules, and a matmul the cost model can count.
Status CheckConvLayer(const std::string& where, const kernels::Conv2dShape& s) {
  if (Status st = kernels::CheckConv2d(s); !st.ok()) return InvalidArgumentError(where + ": " + st.message());
  const double rows = static_cast<double>(s.batch) * s.out_height() * s.out_width();
  if (rows > kMaxGemmRows)
    return InvalidArgumentError(where + ": batch x output pixels = " + std::to_string(s.batch) + " x " +
                                std::to_string(s.out_height()) + " x " + std::to_string(s.out_width()) +
                                ", more than 2^40 (the most rows a layer's matmul may have)");
  return OkStatus();
}

// CheckConvLayer already passed.
WorkloadLayer ConvLayer(const std::string& name, const kernels::Conv2dShape& s, kernels::Precision p) {
  WorkloadLayer l = NewLayer("conv2d", "conv", name, p);
  mesh::OpRecord& r = l.record;
  r.shape = "x" + Dims({s.batch, s.in_channels, s.height, s.width}) + " w" +
            Dims({s.out_channels, s.in_channels, s.kernel_h, s.kernel_w}) + " stride " + std::to_string(s.stride);
  if (s.pad_top > 0) {
    r.shape += " pad " + std::to_string(s.pad_top);
  } else if (s.pad_bottom > 0 || s.pad_right > 0) {  // SCALE-Sim's overhanging last window
    r.shape += " pad bottom " + std::to_string(s.pad_bottom) + " right " + std::to_string(s.pad_right);
  }
  r.cost = kernels::Conv2dCost(s, /*has_bias=*/false);
  const int64_t pixels = s.batch * s.out_height() * s.out_width();
  r.mxu = {{pixels, s.out_channels, s.gemm_k(), 1, 4.0 * s.batch * s.in_channels * s.height * s.width,
            4.0 * s.gemm_k() * s.out_channels, 4.0 * pixels * s.out_channels}};
  return l;
}

// ---------------------------------------------------------------- CSV

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> SplitCsvRow(std::string_view line) {
  std::vector<std::string> f;
  size_t start = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ',') {
      f.push_back(Trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  while (!f.empty() && f.back().empty()) f.pop_back();  // SCALE-Sim's trailing commas
  return f;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The bound's refusal, at the place that passes it.
Status TooManyLayers(const std::string& where, const std::string& what, int64_t max_layers) {
  return InvalidArgumentError(where + ": " + what + " more than " + std::to_string(max_layers) +
                              " layers, the most a workload may price (simulate --max-layers N raises it, up to " +
                              std::to_string(kMaxWorkloadLayers) + ")");
}

StatusOr<std::vector<WorkloadLayer>> ParseCsv(std::string_view text, const std::string& origin,
                                              kernels::Precision p, int64_t max_layers) {
  static const std::vector<std::string> kConv = {"layer name",   "ifmap height", "ifmap width", "filter height",
                                                 "filter width", "channels",     "num filter",  "strides"};
  static const std::vector<std::string> kGemm = {"layer", "m", "n", "k"};  // or "layer name" first
  std::vector<WorkloadLayer> layers;
  const std::vector<std::string>* header = nullptr;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string> f = SplitCsvRow(line);
    if (f.empty()) {
      if (pos > text.size()) break;
      continue;
    }
    const std::string where = origin + ":" + std::to_string(line_no);
    if (header == nullptr) {
      for (const auto* h : {&kConv, &kGemm}) {
        if (f.size() < h->size()) continue;
        bool same = true;
        for (size_t i = 0; i < h->size(); ++i)
          same &= Lower(f[i]) == (*h)[i] || (i == 0 && h == &kGemm && Lower(f[i]) == "layer name");
        if (same) header = h;
      }
      if (header == nullptr)
        return InvalidArgumentError(where + ": not a SCALE-Sim topology header: expected \"Layer name, IFMAP Height, "
                                    "IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\" "
                                    "(conv) or \"Layer, M, N, K,\" (GEMM)");
      continue;
    }
    if (f.size() < header->size())
      return InvalidArgumentError(where + ": " + std::to_string(f.size()) + " fields, the header has " +
                                  std::to_string(header->size()) + " (" + (header == &kConv ? "conv" : "GEMM") +
                                  " form)");
    if (f[0].empty()) return InvalidArgumentError(where + ":1: the layer has no name");
    std::vector<int64_t> v(header->size(), 0);
    for (size_t i = 1; i < header->size(); ++i) {
      int64_t x = 0;
      const char* b = f[i].data();
      const char* e = b + f[i].size();
      auto [ptr, ec] = std::from_chars(b, e, x);
      if (ec != std::errc() || ptr != e || x < 1 || x > kMaxDim)
        return InvalidArgumentError(where + ":" + std::to_string(i + 1) + ": " + (*header)[i] + " is " +
                                    Quoted(f[i]) + ", not an integer from 1 to " + std::to_string(kMaxDim));
      v[i] = x;
    }
    if (static_cast<int64_t>(layers.size()) >= max_layers) return TooManyLayers(where, "the file has", max_layers);
    if (header == &kGemm) {
      layers.push_back(MatmulLayer(f[0], v[1], v[2], v[3], p));
      continue;
    }
    kernels::Conv2dShape s;
    s.batch = 1;
    s.height = v[1];
    s.width = v[2];
    s.kernel_h = v[3];
    s.kernel_w = v[4];
    s.in_channels = v[5];
    s.out_channels = v[6];
    s.stride = static_cast<int>(v[7]);
    if (s.kernel_h > s.height || s.kernel_w > s.width)
      return InvalidArgumentError(where + ": a " + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
                                  " filter does not fit a " + std::to_string(s.height) + "x" +
                                  std::to_string(s.width) + " IFMAP (SCALE-Sim convolves unpadded)");
    // SCALE-Sim's output size, ceil((H - R + stride) / stride): a last
    // window that overhangs the IFMAP still counts (padded bottom / right).
    auto out = [&](int64_t in, int64_t k) { return (in - k + 2 * s.stride - 1) / s.stride; };
    s.pad_bottom = static_cast<int>((out(s.height, s.kernel_h) - 1) * s.stride + s.kernel_h - s.height);
    s.pad_right = static_cast<int>((out(s.width, s.kernel_w) - 1) * s.stride + s.kernel_w - s.width);
    TPUMESH_RETURN_IF_ERROR(CheckConvLayer(where, s));
    if (f[0].find("DP") == std::string::npos) {
      layers.push_back(ConvLayer(f[0], s, p));
      continue;
    }
    // SCALE-Sim's depthwise convention: a layer named with "DP" is one
    // single-channel conv per channel, "<name>Channel_<i>".
    if (static_cast<int64_t>(layers.size()) + s.in_channels > max_layers)
      return TooManyLayers(where, "the depthwise layer's " + std::to_string(s.in_channels) + " channels make",
                           max_layers);
    const int64_t channels = s.in_channels;
    s.in_channels = 1;
    for (int64_t c = 0; c < channels; ++c) layers.push_back(ConvLayer(f[0] + "Channel_" + std::to_string(c), s, p));
  }
  if (header == nullptr) return InvalidArgumentError(origin + ": empty (no SCALE-Sim topology header)");
  if (layers.empty()) return InvalidArgumentError(origin + ": a header and no layers");
  return layers;
}

// ---------------------------------------------------------------- JSON

std::optional<mesh::CollectiveKind> CollectiveOf(const std::string& op) {
  for (mesh::CollectiveKind k : {mesh::CollectiveKind::kPsum, mesh::CollectiveKind::kPmean,
                                 mesh::CollectiveKind::kAllGather, mesh::CollectiveKind::kPsumScatter,
                                 mesh::CollectiveKind::kAllToAll})
    if (op == mesh::CollectiveName(k)) return k;
  return std::nullopt;
}

StatusOr<WorkloadLayer> JsonLayer(const json& j, const std::string& where, kernels::Precision p) {
  if (!j.is_object()) return InvalidArgumentError(where + ": a layer must be a JSON object");
  auto str = [&](const char* key) -> StatusOr<std::string> {
    if (!j.contains(key)) return InvalidArgumentError(where + ": missing field '" + key + "'");
    if (!j[key].is_string() || j[key].get<std::string>().empty())
      return InvalidArgumentError(where + ": field '" + key + "' must be a non-empty string");
    return j[key].get<std::string>();
  };
  auto num = [&](const char* key, std::optional<int64_t> fallback, int64_t lo, int64_t hi) -> StatusOr<int64_t> {
    if (!j.contains(key)) {
      if (fallback) return *fallback;
      return InvalidArgumentError(where + ": missing field '" + key + "'");
    }
    const json& v = j[key];
    const double d = v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
    if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) || d != std::floor(d))
      return InvalidArgumentError(where + ": field '" + key + "' is " + DescribeJson(v) + ", not an integer from " +
                                  std::to_string(lo) + " to " + std::to_string(hi));
    return static_cast<int64_t>(d);
  };
  TPUMESH_ASSIGN_OR_RETURN(const std::string name, str("name"));
  TPUMESH_ASSIGN_OR_RETURN(const std::string op, str("op"));
  static const std::vector<std::string> kCommon = {"name", "op", "repeat"};
  std::vector<std::string> fields;
  WorkloadLayer l;
  if (op == "matmul") {
    fields = {"m", "n", "k"};
    TPUMESH_ASSIGN_OR_RETURN(int64_t m, num("m", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(int64_t n, num("n", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(int64_t k, num("k", std::nullopt, 1, kMaxDim));
    l = MatmulLayer(name, m, n, k, p);
  } else if (op == "conv") {
    fields = {"batch", "height", "width", "in_channels", "out_channels", "kernel", "stride", "padding"};
    kernels::Conv2dShape s;
    TPUMESH_ASSIGN_OR_RETURN(s.batch, num("batch", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.height, num("height", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.width, num("width", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.in_channels, num("in_channels", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.out_channels, num("out_channels", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(int64_t kernel, num("kernel", std::nullopt, 1, 1024));
    TPUMESH_ASSIGN_OR_RETURN(int64_t stride, num("stride", 1, 1, 1024));
    TPUMESH_ASSIGN_OR_RETURN(int64_t pad, num("padding", 0, 0, 1024));
    s.kernel_h = s.kernel_w = kernel;
    s.stride = static_cast<int>(stride);
    s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = static_cast<int>(pad);
    TPUMESH_RETURN_IF_ERROR(CheckConvLayer(where, s));
    l = ConvLayer(name, s, p);
  } else if (op == "attention") {
    fields = {"batch", "q_len", "kv_len", "heads", "head_dim"};
    kernels::AttentionShape s;
    TPUMESH_ASSIGN_OR_RETURN(s.batch, num("batch", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.q_len, num("q_len", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.kv_len, num("kv_len", std::nullopt, 1, kMaxDim));
    TPUMESH_ASSIGN_OR_RETURN(s.heads, num("heads", std::nullopt, 1, 65536));
    TPUMESH_ASSIGN_OR_RETURN(s.head_dim, num("head_dim", std::nullopt, 1, 65536));
    l = NewLayer("attention", "attention", name, p);
    mesh::OpRecord& r = l.record;
    r.shape = "q" + Dims({s.batch, s.q_len, s.heads * s.head_dim}) + " kv" +
              Dims({s.batch, s.kv_len, s.heads * s.head_dim}) + " heads " + std::to_string(s.heads);
    r.cost = kernels::AttentionCost(s);
    const double bh = static_cast<double>(s.batch) * static_cast<double>(s.heads);
    if (bh > kMaxGemmRows)
      return InvalidArgumentError(where + ": batch x heads = " + std::to_string(s.batch) + " x " +
                                  std::to_string(s.heads) + ", more than 2^40 (the most matmuls a layer may run)");
    r.mxu = {{s.q_len, s.kv_len, s.head_dim, bh}, {s.q_len, s.head_dim, s.kv_len, bh}};
  } else if (op == "elementwise") {
    fields = {"elements", "flops_per_element", "transcendentals_per_element", "inputs"};
    TPUMESH_ASSIGN_OR_RETURN(int64_t n, num("elements", std::nullopt, 1, kMaxBytes));
    TPUMESH_ASSIGN_OR_RETURN(int64_t f, num("flops_per_element", 1, 0, 1024));
    TPUMESH_ASSIGN_OR_RETURN(int64_t t, num("transcendentals_per_element", 0, 0, 1024));
    TPUMESH_ASSIGN_OR_RETURN(int64_t inputs, num("inputs", 1, 1, 64));
    l = NewLayer("elementwise", "elementwise", name, p);
    mesh::OpRecord& r = l.record;
    r.shape = "x[" + std::to_string(n) + "] x " + std::to_string(inputs);
    kernels::OpCost c;
    c.flops = static_cast<double>(n) * static_cast<double>(f);
    c.transcendentals = static_cast<double>(n) * static_cast<double>(t);
    c.bytes_read = 4.0 * static_cast<double>(n) * static_cast<double>(inputs);
    c.bytes_written = 4.0 * static_cast<double>(n);
    r.cost = c;
  } else if (auto kind = CollectiveOf(op)) {
    fields = {"axis", "bytes"};
    l = NewLayer(op.c_str(), "collective", name, p);
    TPUMESH_ASSIGN_OR_RETURN(l.axis, str("axis"));
    TPUMESH_ASSIGN_OR_RETURN(l.bytes, num("bytes", std::nullopt, 1, kMaxBytes));
    l.collective = kind;
    l.record.shape = l.axis + " " + std::to_string(l.bytes) + " B";
  } else {
    return InvalidArgumentError(where + ": op " + Quoted(op) +
                                " is not one of matmul, conv, attention, elementwise, psum, pmean, all_gather, "
                                "psum_scatter, all_to_all");
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const auto& k : kCommon) known |= key == k;
    for (const auto& k : fields) known |= key == k;
    if (!known) return InvalidArgumentError(where + ": unknown field " + Quoted(key) + " for op " + Quoted(op));
  }
  TPUMESH_ASSIGN_OR_RETURN(const int64_t repeat, num("repeat", 1, 1, kMaxDim));
  l.record.repeat = static_cast<double>(repeat);
  return l;
}

StatusOr<std::vector<WorkloadLayer>> ParseJson(std::string_view text, const std::string& origin,
                                               kernels::Precision p, int64_t max_layers) {
  TPUMESH_ASSIGN_OR_RETURN(const json j, ParseJsonFile<json>(text, origin));
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    return InvalidArgumentError(origin + ": a JSON workload is an object with a \"layers\" array");
  for (const auto& [key, value] : j.items())
    if (key != "layers") return InvalidArgumentError(origin + ": unknown field " + Quoted(key) + " (only \"layers\")");
  const json& arr = j["layers"];
  if (arr.empty()) return InvalidArgumentError(origin + ": \"layers\" is empty");
  if (static_cast<int64_t>(arr.size()) > max_layers)
    return TooManyLayers(origin, "\"layers\" holds " + std::to_string(arr.size()) + ",", max_layers);
  std::vector<WorkloadLayer> layers;
  layers.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string where = origin + ": layers[" + std::to_string(i) + "]";
    if (arr[i].is_object() && arr[i].contains("name") && arr[i]["name"].is_string())
      where += " (" + Quoted(arr[i]["name"].get<std::string>()) + ")";
    TPUMESH_ASSIGN_OR_RETURN(WorkloadLayer l, JsonLayer(arr[i], where, p));
    layers.push_back(std::move(l));
  }
  return layers;
}

bool EndsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && Lower(std::string(s.substr(s.size() - tail.size()))) == tail;
}

}  // namespace

StatusOr<std::vector<WorkloadLayer>> ParseWorkload(std::string_view text, std::string_view origin,
                                                   kernels::Precision precision, int64_t max_layers) {
  const std::string o = Printable(origin);
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  StatusOr<std::vector<WorkloadLayer>> layers =
      EndsWith(origin, ".csv")    ? ParseCsv(text, o, precision, max_layers)
      : EndsWith(origin, ".json") ? ParseJson(text, o, precision, max_layers)
                                  : InvalidArgumentError(o + ": a workload is a SCALE-Sim topology (.csv) or a JSON "
                                                             "list of ops (.json)");
  // Figures are counted in f32 bytes, as kernels count them; at default the
  // operands sit in HBM as bf16, as the models' records do.
  if (layers.ok() && precision == kernels::Precision::kDefault)
    for (WorkloadLayer& l : *layers) mesh::CountBytesAsBf16(l.record);
  return layers;
}

StatusOr<std::vector<WorkloadLayer>> LoadWorkload(const std::string& path, kernels::Precision precision,
                                                  int64_t max_layers) {
  TPUMESH_ASSIGN_OR_RETURN(std::string text, ReadInputFile(path));
  return ParseWorkload(text, path, precision, max_layers);
}

}  // namespace tpumesh::pipeline
