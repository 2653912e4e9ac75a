#include "pipeline/clip_vocab.h"

#include <zlib.h>

#include <cstdint>

#include "nlohmann/json.hpp"

// The gzip'ed merges between two symbols, placed by the assembler at build
// time (TPUMESH_CLIP_MERGES_FILE: its absolute path, from CMake).
__asm__(
    "  .section .rodata\n"
    "  .balign 16\n"
    "tpumesh_clip_merges_begin:\n"
    "  .incbin \"" TPUMESH_CLIP_MERGES_FILE "\"\n"
    "tpumesh_clip_merges_end:\n"
    "  .previous\n");
extern "C" const unsigned char tpumesh_clip_merges_begin[];
extern "C" const unsigned char tpumesh_clip_merges_end[];

namespace tpumesh::pipeline {
namespace {

constexpr int kMaxMerges = 49152 - 256 - 2;  // 48,894, as CLIP's SimpleTokenizer

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's bytes_to_unicode(), its values in the dict's order: the printable
// bytes as themselves, then every other byte b as U+0100 + n in byte order.
std::vector<std::string> ByteSymbols() {
  std::vector<uint32_t> cps;
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  for (int b = 0; b < 256; ++b)
    if (printable(b)) cps.push_back(static_cast<uint32_t>(b));
  int n = 0;
  for (int b = 0; b < 256; ++b)
    if (!printable(b)) cps.push_back(256u + static_cast<uint32_t>(n++));
  std::vector<std::string> out;
  for (uint32_t cp : cps) {
    std::string s;
    AppendUtf8(cp, s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

StatusOr<std::string> OpenAiClipMerges() {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return InternalError("embedded CLIP merges: inflateInit2 failed");
  z.next_in = const_cast<Bytef*>(tpumesh_clip_merges_begin);
  z.avail_in = static_cast<uInt>(tpumesh_clip_merges_end - tpumesh_clip_merges_begin);
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) return InternalError("embedded CLIP merges: does not inflate (zlib " + std::to_string(rc) + ")");
  return out;
}

std::string ClipVocabJsonFromMerges(std::string_view merges_txt) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  const std::vector<std::string> bytes = ByteSymbols();
  for (const std::string& b : bytes) vocab[b] = id++;
  for (const std::string& b : bytes) vocab[b + "</w>"] = id++;
  size_t pos = merges_txt.find('\n');  // the header line is skipped
  int merges = 0;
  while (pos != std::string_view::npos && pos + 1 < merges_txt.size() && merges < kMaxMerges) {
    const size_t begin = pos + 1;
    pos = merges_txt.find('\n', begin);
    std::string_view line = merges_txt.substr(begin, pos == std::string_view::npos ? pos : pos - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++merges;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    vocab[std::string(line.substr(0, space)) + std::string(line.substr(space + 1))] = id++;
  }
  vocab["<|startoftext|>"] = id++;
  vocab["<|endoftext|>"] = id++;
  return vocab.dump();
}

StatusOr<std::vector<std::pair<std::string, std::string>>> OpenAiClipTokenizerTexts(const std::string& folder,
                                                                                     const std::string& pad) {
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, OpenAiClipMerges());
  std::string vocab = ClipVocabJsonFromMerges(merges);
  const auto ids = nlohmann::json::parse(vocab);
  auto token = [](const std::string& content, bool normalized) {
    return nlohmann::json{{"content", content}, {"lstrip", false}, {"normalized", normalized},
                          {"rstrip", false},    {"single_word", false}, {"special", true}};
  };
  nlohmann::json added = nlohmann::json::object();
  for (const char* t : {"<|startoftext|>", "<|endoftext|>"})
    added[std::to_string(ids[t].get<int>())] = token(t, true);
  if (ids.contains(pad) && pad != "<|endoftext|>") added[std::to_string(ids[pad].get<int>())] = token(pad, false);
  const nlohmann::json config = {{"added_tokens_decoder", added},
                                 {"bos_token", "<|startoftext|>"},
                                 {"clean_up_tokenization_spaces", true},
                                 {"do_lower_case", true},
                                 {"eos_token", "<|endoftext|>"},
                                 {"errors", "replace"},
                                 {"model_max_length", 77},
                                 {"pad_token", pad},
                                 {"tokenizer_class", "CLIPTokenizer"},
                                 {"unk_token", "<|endoftext|>"}};
  const nlohmann::json special = {{"bos_token", "<|startoftext|>"},
                                  {"eos_token", "<|endoftext|>"},
                                  {"pad_token", pad},
                                  {"unk_token", "<|endoftext|>"}};
  return std::vector<std::pair<std::string, std::string>>{
      {folder + "/vocab.json", std::move(vocab)},
      {folder + "/merges.txt", std::move(merges)},
      {folder + "/special_tokens_map.json", special.dump(2)},
      {folder + "/tokenizer_config.json", config.dump(2)}};
}

}  // namespace tpumesh::pipeline
