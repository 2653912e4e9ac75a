// ClipTokenizer: the CLIP byte-level BPE tokenizer exactly as transformers'
// slow CLIPTokenizer without ftfy computes it, as the Stable Diffusion
// pipeline calls it: tokenizer(prompt, padding="max_length", max_length=77,
// truncation=True).
//
// Contract: text clean-up as transformers' BasicTokenizer(strip_accents=False,
// do_split_on_punc=False): control characters dropped, whitespace folded, CJK
// ideographs spaced, NFC normalisation, lower case (full Unicode case
// mapping, via ICU); then the CLIP pattern ('s 't 're 've 'm 'll 'd, runs of
// letters, single numbers, runs of other symbols; Unicode categories from
// ICU), bytes mapped to unicode as GPT-2's bytes_to_unicode, BPE by merge
// rank with the </w> end-of-word marker. Ids: [bos] + tokens + [eos],
// truncated to keep the eos, padded with the pad token (SD 1.x: eos; read
// from special_tokens_map.json when present). Invalid UTF-8 in a prompt is
// InvalidArgument naming the byte offset. Thread-safe after construction.
#ifndef TPUMESH_PIPELINE_TOKENIZER_H_
#define TPUMESH_PIPELINE_TOKENIZER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace tpumesh::pipeline {

class ClipTokenizer {
 public:
  // vocab.json and merges.txt texts; special_tokens_map.json may be empty.
  // `origin` names the source in errors (a folder or a model file).
  static StatusOr<ClipTokenizer> FromStrings(std::string_view vocab_json, std::string_view merges_txt,
                                             std::string_view special_tokens_map_json,
                                             std::string_view origin);
  // A folder with vocab.json, merges.txt and optionally special_tokens_map.json.
  static StatusOr<ClipTokenizer> FromFolder(const std::string& dir);

  // [bos] + BPE ids + [eos], untruncated.
  StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;
  // Exactly max_length ids: truncated (eos kept) and padded.
  StatusOr<std::vector<int32_t>> EncodePadded(std::string_view text, int max_length = 77) const;

  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t pad_id() const { return pad_; }
  size_t vocab_size() const { return vocab_.size(); }

  // transformers' BasicTokenizer clean-up (exposed for tests).
  static StatusOr<std::string> CleanText(std::string_view text);

 private:
  ClipTokenizer() = default;
  std::vector<std::string> Bpe(const std::string& token) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int> ranks_;  // "first second" -> rank
  std::string byte_encoder_[256];               // byte -> UTF-8 of its unicode stand-in
  int32_t bos_ = -1, eos_ = -1, pad_ = -1, unk_ = -1;
};

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_TOKENIZER_H_
