#include "text/tokenizer.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/input_file.h"
#include "nlohmann/json.hpp"
#include "unicode/locid.h"
#include "unicode/normalizer2.h"
#include "unicode/uchar.h"
#include "unicode/unistr.h"
#include "unicode/utf8.h"

namespace tpumesh::pipeline {
namespace {

using Json = nlohmann::json;

// CLIPTokenizer reads merges.txt lines [1, 49152 - 256 - 2] (after strip()).
constexpr int kMaxMerges = 49152 - 256 - 2;
// Python 3.11's unicodedata (Unicode 14.0) made the reference ids; ICU may
// know newer code points, which Python 3.11 sees as unassigned (Cn).
constexpr uint8_t kUnicodeMajor = 14, kUnicodeMinor = 0;

// The CLIP pattern's literal alternatives, in the pattern's order. The first
// two are also the entries of CLIPTokenizer's BPE cache: they map to
// themselves.
constexpr std::string_view kStartOfText = "<|startoftext|>";
constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr std::string_view kLiterals[] = {kStartOfText, kEndOfText, "'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};

void AppendUtf8(std::string& s, UChar32 c) {
  char buf[4];
  int32_t n = 0;
  UBool err = false;
  U8_APPEND(reinterpret_cast<uint8_t*>(buf), n, 4, c, err);
  (void)err;  // c is a decoded scalar value: always encodable
  s.append(buf, n);
}

// The byte offset of the first ill-formed UTF-8 sequence, or -1.
int64_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < n;) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) return at;
  }
  return -1;
}

// Code points of valid UTF-8 (checked by the caller).
std::vector<UChar32> Decode(std::string_view text) {
  std::vector<UChar32> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U8_NEXT(s, i, n, c);
    out.push_back(c);
  }
  return out;
}

std::string Utf8Of(const std::vector<UChar32>& cps, size_t begin, size_t end) {
  std::string s;
  for (size_t i = begin; i < end; ++i) AppendUtf8(s, cps[i]);
  return s;
}

// unicodedata.category() of Python 3.11.
UCharCategory Category(UChar32 c) {
  UVersionInfo age;
  u_charAge(c, age);
  if (age[0] > kUnicodeMajor || (age[0] == kUnicodeMajor && age[1] > kUnicodeMinor)) return U_UNASSIGNED;
  return static_cast<UCharCategory>(u_charType(c));
}

// str.isspace(): category Zs or bidirectional class WS, B or S. The list is
// stable since Unicode 6.3 (U+180E left it) and identical in Python 3.11.
bool PyIsSpace(UChar32 c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// BasicTokenizer's _is_control: category C*, except \t \n \r.
bool IsControl(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (Category(c)) {
    case U_CONTROL_CHAR: case U_FORMAT_CHAR: case U_SURROGATE: case U_PRIVATE_USE_CHAR: case U_UNASSIGNED:
      return true;
    default:
      return false;
  }
}

// BasicTokenizer's _is_whitespace.
bool IsBertWhitespace(UChar32 c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || Category(c) == U_SPACE_SEPARATOR;
}

// BasicTokenizer's _is_chinese_char ranges.
bool IsCjk(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsLetter(UChar32 c) {  // \p{L}
  switch (Category(c)) {
    case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER: case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}

bool IsNumber(UChar32 c) {  // \p{N}
  switch (Category(c)) {
    case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER:
      return true;
    default:
      return false;
  }
}

// [^\s\p{L}\p{N}] under re.IGNORECASE: the regex module tests every case
// variant of the character against the negated set. U+0345 COMBINING GREEK
// YPOGEGRAMMENI (Mn) has the letters U+0399/U+03B9 as case variants, so
// neither [\p{L}] (it is no letter) nor this set matches it: findall skips
// it. It is the only such code point (checked over all of Unicode 14 against
// regex 2026.11).
bool IsOther(UChar32 c) { return !PyIsSpace(c) && c != 0x345 && !IsLetter(c) && !IsNumber(c); }

// str.strip(), lstrip(), rstrip() without arguments, on valid UTF-8.
std::string_view PyStrip(std::string_view s, bool left, bool right) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const int32_t n = static_cast<int32_t>(s.size());
  int32_t b = 0, e = n;
  while (left && b < n) {
    int32_t i = b;
    UChar32 c;
    U8_NEXT(p, i, n, c);
    if (!PyIsSpace(c)) break;
    b = i;
  }
  while (right && e > b) {
    int32_t i = e;
    UChar32 c;
    U8_PREV(p, b, i, c);
    if (!PyIsSpace(c)) break;
    e = i;
  }
  return s.substr(b, e - b);
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes for 256, 257, ... in byte order.
struct ByteTable {
  char32_t to_unicode[256];
  std::string utf8[256];
  ByteTable() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
      AppendUtf8(utf8[b], static_cast<UChar32>(to_unicode[b]));
    }
  }
};

const ByteTable& Bytes() {
  static const ByteTable table;
  return table;
}

StatusOr<std::string> ReadFile(const std::filesystem::path& p) { return ReadInputFile(p.string()); }

// A special-token value of a config: "text", {"content": "text", "lstrip":
// ...} (also with "__type": "AddedToken") or null.
struct TokenValue {
  bool is_null = false;
  std::string content;
  bool lstrip = false, rstrip = false, single_word = false;
};

StatusOr<TokenValue> ParseTokenValue(const Json& v, const std::string& where) {
  TokenValue t;
  if (v.is_null()) {
    t.is_null = true;
  } else if (v.is_string()) {
    t.content = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    t.content = v["content"].get<std::string>();
    auto flag = [&](const char* key) { return v.contains(key) && v[key].is_boolean() && v[key].get<bool>(); };
    t.lstrip = flag("lstrip");
    t.rstrip = flag("rstrip");
    t.single_word = flag("single_word");
  } else {
    return InvalidArgumentError(where + " is neither a string nor an object with a string \"content\"");
  }
  return t;
}

StatusOr<Json> ParseJsonObject(std::string_view text, const std::string& name) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(name + ": not valid JSON");
  if (!j.is_object()) return InvalidArgumentError(name + ": not a JSON object");
  return j;
}

}  // namespace

char32_t ClipTokenizer::ByteToUnicode(uint8_t byte) { return Bytes().to_unicode[byte]; }

int ClipTokenizer::UnicodeToByte(char32_t c) {
  if (c < 256) {
    const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    return printable ? static_cast<int>(c) : -1;
  }
  for (int b = 0; b < 256; ++b)
    if (Bytes().to_unicode[b] == c) return b;
  return -1;
}

StatusOr<std::string> ClipTokenizer::CleanText(std::string_view text) {
  if (int64_t at = FirstInvalidUtf8(text); at >= 0)
    return InvalidArgumentError("prompt is not valid UTF-8 (byte offset " + std::to_string(at) + ")");
  // _clean_text, then _tokenize_chinese_chars.
  icu::UnicodeString u;
  for (UChar32 c : Decode(text)) {
    if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
    if (IsBertWhitespace(c)) {
      u.append(static_cast<UChar32>(' '));
    } else if (IsCjk(c)) {
      u.append(static_cast<UChar32>(' ')).append(c).append(static_cast<UChar32>(' '));
    } else {
      u.append(c);
    }
  }
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(err);
  if (U_FAILURE(err)) return InternalError(std::string("ICU NFC normaliser unavailable: ") + u_errorName(err));
  const icu::UnicodeString normalized = nfc->normalize(u, err);
  if (U_FAILURE(err)) return InternalError(std::string("ICU NFC normalisation failed: ") + u_errorName(err));
  // whitespace_tokenize (str.split()), token.lower() per word, " ".join.
  std::string out;
  const int32_t n = normalized.length();
  for (int32_t i = 0; i < n;) {
    while (i < n && PyIsSpace(normalized.char32At(i))) i = normalized.moveIndex32(i, 1);
    if (i >= n) break;
    int32_t j = i;
    while (j < n && !PyIsSpace(normalized.char32At(j))) j = normalized.moveIndex32(j, 1);
    icu::UnicodeString word(normalized, i, j - i);
    word.toLower(icu::Locale::getRoot());
    if (!out.empty()) out += ' ';
    word.toUTF8String(out);
    i = j;
  }
  return out;
}

StatusOr<ClipTokenizer> ClipTokenizer::FromStrings(const ClipTokenizerTexts& texts, std::string_view origin) {
  const std::string o(origin);
  return Build(texts, {o + "/vocab.json", o + "/merges.txt", o + "/special_tokens_map.json",
                       o + "/tokenizer_config.json"});
}

StatusOr<ClipTokenizer> ClipTokenizer::FromStrings(std::string_view vocab_json, std::string_view merges_txt,
                                                   std::string_view special_tokens_map_json,
                                                   std::string_view origin) {
  return FromStrings(ClipTokenizerTexts{vocab_json, merges_txt, special_tokens_map_json, {}}, origin);
}

StatusOr<ClipTokenizer> ClipTokenizer::FromFiles(const std::string& vocab_json_path,
                                                 const std::string& merges_txt_path) {
  TPUMESH_ASSIGN_OR_RETURN(std::string vocab, ReadFile(vocab_json_path));
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, ReadFile(merges_txt_path));
  return Build(ClipTokenizerTexts{vocab, merges, {}, {}}, {vocab_json_path, merges_txt_path, "", ""});
}

StatusOr<ClipTokenizer> ClipTokenizer::FromFolder(const std::string& dir) {
  const std::filesystem::path d(dir);
  TPUMESH_ASSIGN_OR_RETURN(std::string vocab, ReadFile(d / "vocab.json"));
  TPUMESH_ASSIGN_OR_RETURN(std::string merges, ReadFile(d / "merges.txt"));
  std::string optional[2];
  const char* optional_names[2] = {"special_tokens_map.json", "tokenizer_config.json"};
  for (int k = 0; k < 2; ++k) {
    std::error_code ec;
    if (!std::filesystem::exists(d / optional_names[k], ec)) continue;
    TPUMESH_ASSIGN_OR_RETURN(optional[k], ReadFile(d / optional_names[k]));
    if (optional[k].empty()) return InvalidArgumentError((d / optional_names[k]).string() + ": empty file");
  }
  return Build(ClipTokenizerTexts{vocab, merges, optional[0], optional[1]},
               {(d / "vocab.json").string(), (d / "merges.txt").string(), (d / optional_names[0]).string(),
                (d / optional_names[1]).string()});
}

StatusOr<ClipTokenizer> ClipTokenizer::Build(const ClipTokenizerTexts& texts, const TextNames& names) {
  ClipTokenizer t;

  // vocab.json: {token: id}.
  TPUMESH_ASSIGN_OR_RETURN(Json vocab, ParseJsonObject(texts.vocab_json, names.vocab));
  if (vocab.empty()) return InvalidArgumentError(names.vocab + ": empty vocabulary");
  for (const auto& [tok, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return InvalidArgumentError(names.vocab + ": the id of '" + tok + "' is not an integer in [0, 2^31)");
    t.vocab_[tok] = static_cast<int32_t>(id.get<int64_t>());
  }

  // merges.txt, as read().strip().split("\n")[1:kMaxMerges + 1] with
  // universal newlines, each line split() into a pair.
  if (int64_t at = FirstInvalidUtf8(texts.merges_txt); at >= 0)
    return InvalidArgumentError(names.merges + ": not valid UTF-8 (byte offset " + std::to_string(at) + ")");
  {
    std::string merges;
    merges.reserve(texts.merges_txt.size());
    for (size_t i = 0; i < texts.merges_txt.size(); ++i) {
      const char c = texts.merges_txt[i];
      if (c == '\r') {
        merges += '\n';
        if (i + 1 < texts.merges_txt.size() && texts.merges_txt[i + 1] == '\n') ++i;
      } else {
        merges += c;
      }
    }
    const std::string_view stripped = PyStrip(merges, true, true);
    int line_no = 1;  // of the file, for errors
    for (size_t i = 0; merges.data() + i < stripped.data(); ++i) line_no += merges[i] == '\n';
    int index = 0;  // of the stripped text's lines
    for (size_t pos = 0; pos <= stripped.size() && index <= kMaxMerges; ++index, ++line_no) {
      size_t end = stripped.find('\n', pos);
      if (end == std::string_view::npos) end = stripped.size();
      const std::string_view line = stripped.substr(pos, end - pos);
      pos = end + 1;
      if (index == 0) continue;  // "#version: 0.2", skipped unread as CLIPTokenizer does
      std::vector<std::string> fields;
      const std::vector<UChar32> cps = Decode(line);
      for (size_t a = 0; a < cps.size();) {
        if (PyIsSpace(cps[a])) { ++a; continue; }
        size_t b = a;
        while (b < cps.size() && !PyIsSpace(cps[b])) ++b;
        fields.push_back(Utf8Of(cps, a, b));
        a = b;
      }
      if (fields.size() != 2)
        return InvalidArgumentError(names.merges + ": line " + std::to_string(line_no) + " has " +
                                    std::to_string(fields.size()) + " fields, want two symbols");
      t.ranks_[fields[0] + " " + fields[1]] = index - 1;  // dict(zip(...)): a repeat takes the later rank
    }
  }
  if (t.ranks_.empty()) return InvalidArgumentError(names.merges + ": no merges after the header line");

  // Special tokens, as from_pretrained resolves them.
  TokenValue special[4] = {{false, std::string(kStartOfText)}, {false, std::string(kEndOfText)},
                           {false, std::string(kEndOfText)}, {false, std::string(kEndOfText)}};
  const char* keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
  std::vector<TokenValue> additional;
  std::vector<std::pair<int32_t, TokenValue>> decoder;  // added_tokens_decoder, file order
  bool has_decoder = false;
  if (!texts.tokenizer_config_json.empty()) {
    const std::string& name = names.tokenizer_config;
    TPUMESH_ASSIGN_OR_RETURN(Json cfg, ParseJsonObject(texts.tokenizer_config_json, name));
    for (int k = 0; k < 4; ++k) {
      if (!cfg.contains(keys[k])) continue;
      TPUMESH_ASSIGN_OR_RETURN(special[k], ParseTokenValue(cfg[keys[k]], name + ": " + keys[k]));
    }
    if (cfg.contains("additional_special_tokens") && cfg["additional_special_tokens"].is_array()) {
      for (const Json& v : cfg["additional_special_tokens"]) {
        TPUMESH_ASSIGN_OR_RETURN(TokenValue a, ParseTokenValue(v, name + ": additional_special_tokens entry"));
        if (!a.is_null) additional.push_back(a);
      }
    }
    if (cfg.contains("added_tokens_decoder")) {
      has_decoder = true;
      const Json& dec = cfg["added_tokens_decoder"];
      if (!dec.is_object()) return InvalidArgumentError(name + ": added_tokens_decoder is not an object");
      for (const auto& [key, v] : dec.items()) {
        int64_t id = -1;
        try {
          size_t used = 0;
          id = std::stoll(key, &used);
          if (used != key.size()) id = -1;
        } catch (...) {
          id = -1;
        }
        if (id < 0 || id > INT32_MAX)
          return InvalidArgumentError(name + ": added_tokens_decoder key '" + key + "' is not an id");
        TPUMESH_ASSIGN_OR_RETURN(TokenValue a, ParseTokenValue(v, name + ": added_tokens_decoder[" + key + "]"));
        if (a.is_null) return InvalidArgumentError(name + ": added_tokens_decoder[" + key + "] is null");
        decoder.emplace_back(static_cast<int32_t>(id), a);
      }
    }
    for (const char* side : {"padding_side", "truncation_side"}) {
      if (!cfg.contains(side)) continue;
      const Json& v = cfg[side];
      if (!v.is_string() || (v.get<std::string>() != "left" && v.get<std::string>() != "right"))
        return InvalidArgumentError(name + ": " + side + " is not \"left\" or \"right\"");
      (std::string_view(side) == "padding_side" ? t.pad_left_ : t.truncate_left_) = v.get<std::string>() == "left";
    }
  }
  // Legacy layout: special_tokens_map.json overrides, unless the config
  // carries added_tokens_decoder (then transformers does not read it).
  if (!has_decoder && !texts.special_tokens_map_json.empty()) {
    const std::string& name = names.special_tokens_map;
    TPUMESH_ASSIGN_OR_RETURN(Json map, ParseJsonObject(texts.special_tokens_map_json, name));
    for (int k = 0; k < 4; ++k) {
      if (!map.contains(keys[k])) continue;
      TPUMESH_ASSIGN_OR_RETURN(special[k], ParseTokenValue(map[keys[k]], name + ": " + keys[k]));
    }
    if (map.contains("additional_special_tokens") && map["additional_special_tokens"].is_array()) {
      for (const Json& v : map["additional_special_tokens"]) {
        TPUMESH_ASSIGN_OR_RETURN(TokenValue a, ParseTokenValue(v, name + ": additional_special_tokens entry"));
        if (!a.is_null) additional.push_back(a);
      }
    }
  }
  const std::string& special_source =
      has_decoder || texts.special_tokens_map_json.empty() ? names.tokenizer_config : names.special_tokens_map;

  // Added tokens: added_tokens_decoder first, then every special token not in
  // it (flags of a special token equal to a decoder entry are the entry's).
  for (const auto& [id, v] : decoder) {
    if (v.content.empty()) continue;
    t.added_.push_back({v.content, id, v.lstrip, v.rstrip, v.single_word});
    t.added_ids_[v.content] = id;
  }
  std::vector<TokenValue> specials(special, special + 4);
  specials.insert(specials.end(), additional.begin(), additional.end());
  for (size_t k = 0; k < specials.size(); ++k) {
    const TokenValue& v = specials[k];
    if (v.is_null || v.content.empty() || t.added_ids_.count(v.content)) continue;
    auto it = t.vocab_.find(v.content);
    if (it == t.vocab_.end())
      return InvalidArgumentError(special_source + ": " + (k < 4 ? keys[k] : "additional special token") + " '" +
                                  v.content + "' is not in " + names.vocab + " nor in added_tokens_decoder");
    t.added_.push_back({v.content, it->second, v.lstrip, v.rstrip, v.single_word});
    t.added_ids_[v.content] = it->second;
  }
  for (int k : {0, 1})
    if (special[k].is_null) return InvalidArgumentError(special_source + ": " + keys[k] + " is null");
  t.bos_ = t.added_ids_.at(special[0].content);
  t.eos_ = t.added_ids_.at(special[1].content);
  if (!special[3].is_null) t.pad_ = t.added_ids_.at(special[3].content);
  if (!special[2].is_null) t.unk_token_ = special[2].content;
  return t;
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
    (void)c;
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
    merged.reserve(word.size());
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

void ClipTokenizer::TokenizeClean(const std::string& clean, std::vector<std::string>& out) const {
  const std::vector<UChar32> cps = Decode(clean);
  const ByteTable& bytes = Bytes();
  auto emit = [&](size_t begin, size_t end) {
    std::string piece = Utf8Of(cps, begin, end);
    if (piece == kStartOfText || piece == kEndOfText) {  // the BPE cache's entries
      out.push_back(std::move(piece));
      return;
    }
    std::string mapped;
    for (unsigned char b : piece) mapped += bytes.utf8[b];
    for (std::string& sym : Bpe(mapped)) out.push_back(std::move(sym));
  };
  auto literal_at = [&](size_t i, std::string_view lit) {
    if (i + lit.size() > cps.size()) return false;
    for (size_t k = 0; k < lit.size(); ++k)
      if (cps[i + k] != static_cast<UChar32>(lit[k])) return false;
    return true;
  };
  // re.findall: the first alternative that matches at i, else skip one.
  // The text is lower-cased, so IGNORECASE changes nothing for the literals
  // (no other case variant of their letters survives lower()).
  size_t i = 0;
  while (i < cps.size()) {
    bool matched = false;
    for (std::string_view lit : kLiterals) {
      if (literal_at(i, lit)) {
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
    } else if (IsOther(c)) {
      while (j < cps.size() && IsOther(cps[j])) ++j;
      emit(i, j);
    }
    i = j;
  }
}

StatusOr<std::vector<std::string>> ClipTokenizer::Tokenize(std::string_view text) const {
  if (int64_t at = FirstInvalidUtf8(text); at >= 0)
    return InvalidArgumentError("prompt is not valid UTF-8 (byte offset " + std::to_string(at) + ")");
  // tokens_trie.split: cut at added tokens, leftmost-longest, no empty pieces.
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* best = nullptr;
    for (const AddedToken& a : added_)
      if (text.compare(i, a.content.size(), a.content) == 0 && (!best || a.content.size() > best->content.size()))
        best = &a;
    if (!best) {
      ++i;
      continue;
    }
    if (i > start) pieces.emplace_back(text.substr(start, i - start));
    pieces.push_back(best->content);
    i += best->content.size();
    start = i;
  }
  if (start < text.size()) pieces.emplace_back(text.substr(start));

  // PreTrainedTokenizer.tokenize's stripping and single_word handling.
  auto find_added = [&](const std::string& s) -> const AddedToken* {
    auto it = added_ids_.find(s);
    if (it == added_ids_.end()) return nullptr;
    for (auto a = added_.rbegin(); a != added_.rend(); ++a)  // the last entry of that content
      if (a->content == s) return &*a;
    return nullptr;
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    const AddedToken* a = find_added(pieces[i]);
    if (!a) continue;
    const std::string token = pieces[i];
    const std::string left = i > 0 ? pieces[i - 1] : "";
    const std::string right = i + 1 < pieces.size() ? pieces[i + 1] : "";
    if (a->rstrip && !right.empty()) pieces[i + 1] = std::string(PyStrip(right, true, false));
    if (a->lstrip && !left.empty()) pieces[i - 1] = std::string(PyStrip(left, false, true));
    if (a->single_word && !left.empty() && left.back() != ' ') {
      pieces[i - 1] += token;
      pieces[i].clear();
    } else if (a->single_word && !right.empty() && right.front() != ' ') {
      pieces[i + 1] = token + pieces[i + 1];
      pieces[i].clear();
    }
  }
  std::vector<std::string> tokens;
  for (const std::string& piece : pieces) {
    if (piece.empty()) continue;
    if (added_ids_.count(piece)) {
      tokens.push_back(piece);
      continue;
    }
    TPUMESH_ASSIGN_OR_RETURN(std::string clean, CleanText(piece));
    TokenizeClean(clean, tokens);
  }
  return tokens;
}

StatusOr<int32_t> ClipTokenizer::TokenToId(const std::string& token) const {
  // _convert_token_to_id_with_added_voc: added tokens, vocab, vocab[unk].
  if (auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
  if (auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  if (auto it = vocab_.find(unk_token_); !unk_token_.empty() && it != vocab_.end()) return it->second;
  return FailedPreconditionError("token '" + token + "' is not in the vocabulary and the unk token '" +
                                 unk_token_ + "' is not either");
}

StatusOr<std::vector<int32_t>> ClipTokenizer::Encode(std::string_view text) const {
  TPUMESH_ASSIGN_OR_RETURN(std::vector<std::string> tokens, Tokenize(text));
  std::vector<int32_t> ids;
  ids.reserve(tokens.size() + 2);
  ids.push_back(bos_);
  for (const std::string& tok : tokens) {
    TPUMESH_ASSIGN_OR_RETURN(int32_t id, TokenToId(tok));
    ids.push_back(id);
  }
  ids.push_back(eos_);
  return ids;
}

StatusOr<std::vector<int32_t>> ClipTokenizer::EncodePadded(std::string_view text, int max_length) const {
  if (max_length < 2) return InvalidArgumentError("max_length " + std::to_string(max_length) + " is below 2");
  if (pad_ < 0) return FailedPreconditionError("the tokenizer has no pad token (pad_token is null)");
  TPUMESH_ASSIGN_OR_RETURN(std::vector<int32_t> ids, Encode(text));
  const size_t max = static_cast<size_t>(max_length);
  if (ids.size() > max) {  // keep bos, eos and max_length - 2 of the middle
    const size_t remove = ids.size() - max;
    if (truncate_left_) {
      ids.erase(ids.begin() + 1, ids.begin() + 1 + remove);
    } else {
      ids.erase(ids.end() - 1 - remove, ids.end() - 1);
    }
  }
  if (pad_left_) {
    ids.insert(ids.begin(), max - ids.size(), pad_);
  } else {
    ids.resize(max, pad_);
  }
  return ids;
}

StatusOr<std::vector<int32_t>> ClipTokenizer::EncodeBatch(const std::vector<std::string>& texts,
                                                          int max_length) const {
  std::vector<int32_t> out;
  out.reserve(texts.size() * static_cast<size_t>(std::max(max_length, 0)));
  for (size_t i = 0; i < texts.size(); ++i) {
    auto row = EncodePadded(texts[i], max_length);
    if (!row.ok()) return row.status().WithContext("prompt " + std::to_string(i));
    out.insert(out.end(), row->begin(), row->end());
  }
  return out;
}

}  // namespace tpumesh::pipeline
