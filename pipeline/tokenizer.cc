#include "pipeline/tokenizer.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"
#include "unicode/locid.h"
#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"
#include "unicode/utf8.h"

namespace tpumesh::pipeline {
namespace {

void AppendUtf8(std::string& s, UChar32 c) {
  char buf[4];
  int32_t n = 0;
  UBool err = false;
  U8_APPEND(reinterpret_cast<uint8_t*>(buf), n, 4, c, err);
  (void)err;  // c comes from a decoded string or a byte: always encodable
  s.append(buf, n);
}

// Decodes UTF-8 into code points; InvalidArgument at the first bad byte.
StatusOr<std::vector<UChar32>> Decode(std::string_view text) {
  std::vector<UChar32> out;
  int32_t i = 0;
  const int32_t n = static_cast<int32_t>(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  while (i < n) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) return InvalidArgumentError("prompt is not valid UTF-8 (byte offset " + std::to_string(at) + ")");
    out.push_back(c);
  }
  return out;
}

bool IsWhitespace(UChar32 c) {  // BasicTokenizer's _is_whitespace
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_charType(c) == U_SPACE_SEPARATOR;
}

bool IsControl(UChar32 c) {  // BasicTokenizer's _is_control: category C*, not \t \n \r
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(c)) {
    case U_CONTROL_CHAR: case U_FORMAT_CHAR: case U_SURROGATE: case U_PRIVATE_USE_CHAR: case U_UNASSIGNED:
      return true;
    default:
      return false;
  }
}

bool IsCjk(UChar32 c) {  // BasicTokenizer's _is_chinese_char ranges
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsLetter(UChar32 c) {  // \p{L}
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER: case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}

bool IsNumber(UChar32 c) {  // \p{N}
  switch (u_charType(c)) {
    case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER:
      return true;
    default:
      return false;
  }
}

// Python's str.isspace() for the pattern's \s.
bool IsSpace(UChar32 c) { return u_isUWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

StatusOr<std::string> ReadFile(const std::filesystem::path& p, bool required) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    if (required) return NotFoundError(p.string() + ": missing");
    return std::string();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

StatusOr<std::string> ClipTokenizer::CleanText(std::string_view text) {
  TPUMESH_ASSIGN_OR_RETURN(std::vector<UChar32> cps, Decode(text));
  // _clean_text and _tokenize_chinese_chars.
  icu::UnicodeString u;
  for (UChar32 c : cps) {
    if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
    if (IsWhitespace(c)) {
      u.append(static_cast<UChar32>(' '));
    } else if (IsCjk(c)) {
      u.append(static_cast<UChar32>(' ')).append(c).append(static_cast<UChar32>(' '));
    } else {
      u.append(c);
    }
  }
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return InternalError("ICU NFC normaliser unavailable");
  icu::UnicodeString normalized = nfc->normalize(u, err);
  if (U_FAILURE(err)) return InternalError("ICU NFC normalisation failed");
  normalized.toLower(icu::Locale::getRoot());
  std::string utf8;
  normalized.toUTF8String(utf8);
  // whitespace_tokenize, then " ".join.
  TPUMESH_ASSIGN_OR_RETURN(std::vector<UChar32> lower, Decode(utf8));
  std::string out;
  bool pending_space = false;
  for (UChar32 c : lower) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    AppendUtf8(out, c);
  }
  return out;
}

StatusOr<ClipTokenizer> ClipTokenizer::FromStrings(std::string_view vocab_json, std::string_view merges_txt,
                                                   std::string_view special_json, std::string_view origin) {
  const std::string where(origin);
  ClipTokenizer t;
  nlohmann::json vocab = nlohmann::json::parse(vocab_json, nullptr, false);
  if (vocab.is_discarded() || !vocab.is_object())
    return InvalidArgumentError(where + ": vocab.json is not a JSON object of token -> id");
  for (const auto& [tok, id] : vocab.items()) {
    if (!id.is_number_integer()) return InvalidArgumentError(where + ": vocab.json id of '" + tok + "' is not an integer");
    t.vocab_[tok] = id.get<int32_t>();
  }
  // merges.txt: a "#version" line, then "first second" per line, in rank order.
  std::istringstream lines{std::string(merges_txt)};
  std::string line;
  int rank = 0, lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (lineno == 1 && line.rfind("#version", 0) == 0) continue;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
      return InvalidArgumentError(where + ": merges.txt line " + std::to_string(lineno) +
                                  " is not two space-separated symbols");
    t.ranks_.emplace(line, rank++);
  }
  if (t.ranks_.empty()) return InvalidArgumentError(where + ": merges.txt has no merges");
  // GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest
  // to 256, 257, ... in byte order.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    AppendUtf8(t.byte_encoder_[b], printable ? b : next++);
  }
  auto id_of = [&](const std::string& tok) -> int32_t {
    auto it = t.vocab_.find(tok);
    return it == t.vocab_.end() ? -1 : it->second;
  };
  t.bos_ = id_of("<|startoftext|>");
  t.eos_ = id_of("<|endoftext|>");
  if (t.bos_ < 0 || t.eos_ < 0)
    return InvalidArgumentError(where + ": vocab.json lacks <|startoftext|> or <|endoftext|>");
  t.unk_ = t.eos_;
  t.pad_ = t.eos_;
  if (!special_json.empty()) {
    nlohmann::json sp = nlohmann::json::parse(special_json, nullptr, false);
    if (sp.is_discarded() || !sp.is_object())
      return InvalidArgumentError(where + ": special_tokens_map.json is not a JSON object");
    auto content = [](const nlohmann::json& v) -> std::string {
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      return "";
    };
    for (const char* key : {"pad_token", "unk_token"}) {
      if (!sp.contains(key)) continue;
      const std::string tok = content(sp[key]);
      const int32_t id = id_of(tok);
      if (id < 0)
        return InvalidArgumentError(where + ": special_tokens_map.json " + key + " '" + tok + "' is not in the vocabulary");
      (std::string(key) == "pad_token" ? t.pad_ : t.unk_) = id;
    }
  }
  return t;
}

StatusOr<ClipTokenizer> ClipTokenizer::FromFolder(const std::string& dir) {
  const std::filesystem::path d(dir);
  TPUMESH_ASSIGN_OR_RETURN(std::string vocab, ReadFile(d / "vocab.json", true));
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, ReadFile(d / "merges.txt", true));
  TPUMESH_ASSIGN_OR_RETURN(std::string special, ReadFile(d / "special_tokens_map.json", false));
  return FromStrings(vocab, merges, special, dir);
}

std::vector<std::string> ClipTokenizer::Bpe(const std::string& token) const {
  // Symbols: the token's code points, the last one with "</w>".
  std::vector<std::string> word;
  const auto* s = reinterpret_cast<const uint8_t*>(token.data());
  const int32_t n = static_cast<int32_t>(token.size());
  for (int32_t i = 0; i < n;) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    word.emplace_back(token.substr(start, i - start));
  }
  if (word.empty()) return word;
  word.back() += "</w>";
  while (word.size() > 1) {
    int best = INT_MAX;
    size_t best_i = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = ranks_.find(word[i] + " " + word[i + 1]);
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        best_i = i;
      }
    }
    if (best == INT_MAX) break;
    // Merge every occurrence of the best pair, left to right.
    const std::string first = word[best_i], second = word[best_i + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(first + second);
        i += 2;
      } else {
        merged.push_back(word[i]);
        ++i;
      }
    }
    word.swap(merged);
  }
  return word;
}

StatusOr<std::vector<int32_t>> ClipTokenizer::Encode(std::string_view text) const {
  TPUMESH_ASSIGN_OR_RETURN(std::string clean, CleanText(text));
  TPUMESH_ASSIGN_OR_RETURN(std::vector<UChar32> cps, Decode(clean));
  std::vector<int32_t> ids = {bos_};
  auto emit = [&](size_t begin, size_t end) {
    std::string bytes;
    for (size_t i = begin; i < end; ++i) AppendUtf8(bytes, cps[i]);
    std::string mapped;
    for (unsigned char b : bytes) mapped += byte_encoder_[b];
    for (const std::string& sym : Bpe(mapped)) {
      auto it = vocab_.find(sym);
      ids.push_back(it == vocab_.end() ? unk_ : it->second);
    }
  };
  auto starts_with = [&](size_t i, std::string_view lit) {
    if (i + lit.size() > cps.size()) return false;
    for (size_t k = 0; k < lit.size(); ++k)
      if (u_tolower(cps[i + k]) != static_cast<UChar32>(lit[k])) return false;
    return true;
  };
  // The CLIP pattern, alternatives in order, as re.findall scans.
  static constexpr std::string_view kAlternatives[] = {"<|startoftext|>", "<|endoftext|>", "'s", "'t", "'re",
                                                       "'ve", "'m", "'ll", "'d"};
  size_t i = 0;
  while (i < cps.size()) {
    bool matched = false;
    for (std::string_view lit : kAlternatives) {
      if (starts_with(i, lit)) {
        emit(i, i + lit.size());
        i += lit.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;
    const UChar32 c = cps[i];
    size_t j = i + 1;
    if (IsLetter(c)) {
      while (j < cps.size() && IsLetter(cps[j])) ++j;
      emit(i, j);
    } else if (IsNumber(c)) {
      emit(i, j);
    } else if (!IsSpace(c)) {
      while (j < cps.size() && !IsSpace(cps[j]) && !IsLetter(cps[j]) && !IsNumber(cps[j])) ++j;
      emit(i, j);
    }
    i = j;
  }
  ids.push_back(eos_);
  return ids;
}

StatusOr<std::vector<int32_t>> ClipTokenizer::EncodePadded(std::string_view text, int max_length) const {
  if (max_length < 2) return InvalidArgumentError("max_length must be >= 2");
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int32_t> ids, Encode(text));
  if (static_cast<int>(ids.size()) > max_length) {
    ids.resize(max_length);
    ids.back() = eos_;
  }
  ids.resize(max_length, pad_);
  return ids;
}

}  // namespace tpumesh::pipeline
