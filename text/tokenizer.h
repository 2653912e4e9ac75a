// ClipTokenizer: the CLIP byte-level BPE tokenizer, computing the ids that
// transformers' slow CLIPTokenizer (no ftfy installed) gives when the Stable
// Diffusion pipeline calls tokenizer(prompt, padding="max_length",
// max_length=77, truncation=True).
//
// Contract, step by step as transformers 4.45 does it:
//  1. Added tokens (bos/eos/unk/pad, additional_special_tokens and
//     tokenizer_config.json's added_tokens_decoder) are split out of the raw
//     prompt first, leftmost-longest, case-sensitive, honouring their
//     lstrip/rstrip/single_word flags; each becomes its id directly.
//  2. Every other piece goes through BasicTokenizer(strip_accents=False,
//     do_split_on_punc=False): NUL, U+FFFD and category C* dropped (except
//     \t \n \r), whitespace (\t \n \r, Zs) made ' ', spaces put around the
//     CJK ideograph blocks, NFC, split on str.isspace(), each word lower-cased
//     (full Unicode mapping, final sigma), words joined by one space.
//  3. The CLIP pattern <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|'d|
//     [\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+ cuts the text (findall: characters no
//     alternative matches are skipped; with re.IGNORECASE that includes
//     U+0345). The two special literals map to their ids; any other piece is
//     byte-encoded with GPT-2's bytes_to_unicode and merged by BPE rank, the
//     last symbol carrying "</w>". A symbol missing from the vocabulary is the
//     unk token.
//  4. [bos] + ids + [eos]; EncodePadded truncates the middle to
//     max_length - 2 (eos kept) and pads with the pad token, on the sides that
//     tokenizer_config.json names (default right).
// Unicode properties come from ICU, pinned to Unicode 14.0 (the
// unicodedata of Python 3.11, which made the reference ids): a code point
// assigned later counts as unassigned and is dropped, as Python 3.11 does.
// Loading follows from_pretrained: tokenizer_config.json gives the special
// tokens; special_tokens_map.json overrides them only when the config has no
// added_tokens_decoder; defaults are <|startoftext|>, <|endoftext|> (eos, unk
// and pad). merges.txt is read as CLIPTokenizer reads it: the first line is
// skipped whatever it holds, at most 48,894 merges are used, a repeated merge
// takes its last rank. Deliberately stricter than transformers (which would
// load them silently): a merges line that is not two symbols, an empty merges
// list, a special token found neither in vocab.json nor in
// added_tokens_decoder. A merge whose result is not in vocab.json is accepted,
// as transformers does (such a symbol encodes as unk). added_tokens.json and
// tokenizer.json are not read. Invalid UTF-8 in a prompt is InvalidArgument
// naming the byte offset (a Python str cannot hold it). Thread-safe after
// construction (no BPE cache).
#ifndef TPUMESH_TEXT_TOKENIZER_H_
#define TPUMESH_TEXT_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace tpumesh::pipeline {

// The texts of a diffusers/transformers tokenizer/ folder. The two JSON
// configs are optional (empty: absent).
struct ClipTokenizerTexts {
  std::string_view vocab_json;
  std::string_view merges_txt;
  std::string_view special_tokens_map_json;
  std::string_view tokenizer_config_json;
};

class ClipTokenizer {
 public:
  // `origin` prefixes every error (a folder, or "model.h5: tokenizer").
  static StatusOr<ClipTokenizer> FromStrings(const ClipTokenizerTexts& texts, std::string_view origin);
  static StatusOr<ClipTokenizer> FromStrings(std::string_view vocab_json, std::string_view merges_txt,
                                             std::string_view special_tokens_map_json,
                                             std::string_view origin);
  // vocab.json + merges.txt with the default special tokens.
  static StatusOr<ClipTokenizer> FromFiles(const std::string& vocab_json_path,
                                           const std::string& merges_txt_path);
  // A folder with vocab.json, merges.txt and optionally
  // special_tokens_map.json and tokenizer_config.json.
  static StatusOr<ClipTokenizer> FromFolder(const std::string& dir);

  // [bos] + BPE ids + [eos], untruncated (tokenizer(prompt)["input_ids"]).
  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;
  // Exactly max_length (>= 2) ids: truncated (eos kept) and padded.
  StatusOr<std::vector<int32_t>> EncodePadded(std::string_view text, int max_length = 77) const;
  // EncodePadded of each text, row after row: [texts.size() * max_length].
  StatusOr<std::vector<int32_t>> EncodeBatch(const std::vector<std::string>& texts,
                                             int max_length = 77) const;
  // The token strings, without bos/eos (tokenizer.tokenize(prompt)).
  StatusOr<std::vector<std::string>> Tokenize(std::string_view text) const;

  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }  // -1: the config sets pad_token to null
  size_t vocab_size() const { return vocab_.size(); }

  // Step 2 of the contract, on a text without added tokens (for tests).
  static StatusOr<std::string> CleanText(std::string_view text);
  // GPT-2's bytes_to_unicode: the code point standing for a byte, and back
  // (-1 for a code point that stands for no byte).
  static char32_t ByteToUnicode(uint8_t byte);
  static int UnicodeToByte(char32_t c);

 private:
  struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool lstrip = false, rstrip = false, single_word = false;
  };

  // How errors name each text: a path, or "origin/vocab.json".
  struct TextNames {
    std::string vocab, merges, special_tokens_map, tokenizer_config;
  };

  ClipTokenizer() = default;
  static StatusOr<ClipTokenizer> Build(const ClipTokenizerTexts& texts, const TextNames& names);
  // Step 3 on one cleaned piece: appends token strings.
  void TokenizeClean(const std::string& clean, std::vector<std::string>& out) const;
  std::vector<std::string> Bpe(const std::string& byte_encoded) const;
  StatusOr<int32_t> TokenToId(const std::string& token) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int> ranks_;  // "first second" -> rank
  std::vector<AddedToken> added_;
  std::unordered_map<std::string, int32_t> added_ids_;
  std::string unk_token_;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  bool pad_left_ = false, truncate_left_ = false;
};

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_TEXT_TOKENIZER_H_
