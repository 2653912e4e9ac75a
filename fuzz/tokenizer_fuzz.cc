// The tokenizer's files: vocab.json, merges.txt and special_tokens_map.json
// (the input split at NUL bytes), then an encoding of the rest.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t nul = in.find('\0', pos);
    parts.push_back(in.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos));
    pos = nul == std::string_view::npos ? in.size() : nul + 1;
  }
  const std::string_view prompt = in.substr(pos);
  tpumesh::pipeline::ClipTokenizerTexts texts{parts[0], parts[1], parts[2], {}};
  auto tok = tpumesh::pipeline::ClipTokenizer::FromStrings(texts, "fuzz");
  if (tok.ok()) (void)tok->EncodePadded(prompt, 77);
  return 0;
}
