#include "pipeline/request_text.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <tuple>
#include <utility>

#include "base/printable.h"
#include "io/png.h"
#include "models/nn.h"

namespace tpumesh::pipeline {
namespace {

// "A,B" -> {A, B}, two integers >= min.
StatusOr<std::array<int, 2>> ParsePair(const std::string& flag, const std::string& text, const char* form,
                                       int min) {
  const size_t comma = text.find(',');
  std::array<int, 2> out{};
  bool ok = comma != std::string::npos;
  for (int i = 0; ok && i < 2; ++i) {
    const std::string part = i == 0 ? text.substr(0, comma) : text.substr(comma + 1);
    char* end = nullptr;
    errno = 0;
    const long v = part.empty() ? -1 : std::strtol(part.c_str(), &end, 10);
    ok = errno == 0 && end != nullptr && *end == '\0' && v >= min && v <= 1 << 20;
    out[i] = static_cast<int>(v);
  }
  if (!ok)
    return InvalidArgumentError(flag + " '" + text + "': expected " + form + ", two integers from " +
                                std::to_string(min) + " to 1048576");
  return out;
}

}  // namespace

std::string GuidanceRange() { return "0 to 1000"; }

Status ReadImageInputs(const ImageInputFlags& f, GenerateRequest* r) {
  for (auto [flag, files, mode, out] :
       {std::tuple{"--init-image", &f.init_images, PngRead::kRgbOnly, &r->init_images},
        std::tuple{"--mask", &f.masks, PngRead::kGrey, &r->masks}}) {
    for (const std::string& path : *files) {
      auto image = ReadPngAs(path, mode);
      if (!image.ok()) {
        const Status& st = image.status();
        if (mode == PngRead::kRgbOnly && st.message().find("only 8-bit RGB") != std::string::npos)
          return InvalidArgumentError(std::string(flag) + ": " + std::string(st.message()) +
                                      " (convert it to 8-bit RGB, e.g. PIL's image.convert(\"RGB\"))");
        return st.WithContext(flag);
      }
      out->push_back({path, std::move(image).value()});
    }
  }
  r->strength = f.strength;
  return OkStatus();
}

StatusOr<GenerateRequest> ParseRequestFlags(const RequestFlags& f) {
  GenerateRequest r = f.request;
  if (f.guidance && !(*f.guidance >= 0 && *f.guidance <= kMaxGuidance)) {
    return InvalidArgumentError(std::string("--guidance must be a finite number, ") + GuidanceRange() + ", got " +
                                ShortestNumber(*f.guidance));
  }
  r.guidance = f.guidance;
  TPUMESH_ASSIGN_OR_RETURN(r.precision, models::ParsePrecision(f.precision));
  for (const std::string& kv : f.scheduler_opts) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgumentError("--scheduler-opt '" + kv + "': expected KEY=VALUE");
    r.scheduler_overrides.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  // W,H and X,Y on the command line; diffusers' tuples are (h, w) and (top, left).
  for (auto [flag, text, out, form, min] :
       {std::tuple{"--original-size", &f.original_size, &r.sizes.original_size, "W,H", 1},
        {"--crops-coords-top-left", &f.crops_coords_top_left, &r.sizes.crops_coords_top_left, "X,Y", 0},
        {"--target-size", &f.target_size, &r.sizes.target_size, "W,H", 1}}) {
    if (text->empty()) continue;
    TPUMESH_ASSIGN_OR_RETURN(auto xy, ParsePair(flag, *text, form, min));
    *out = {xy[1], xy[0]};
  }
  return r;
}

StatusOr<uint64_t> ParseSeed(const std::string& text) {
  const Status bad = InvalidArgumentError("--seed " + Quoted(text) + ": expected a whole number from 0 to 18446744073709551615");
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos) return bad;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return bad;
  return static_cast<uint64_t>(v);
}

StatusOr<std::vector<LoraSpec>> ParseLoraFlags(const std::vector<std::string>& loras) {
  std::vector<LoraSpec> specs;
  for (const std::string& text : loras) {
    TPUMESH_ASSIGN_OR_RETURN(LoraSpec spec, ParseLoraSpec(text));
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace tpumesh::pipeline
