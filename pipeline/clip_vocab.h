// The OpenAI CLIP BPE vocabulary (the tokenizer of every Stable Diffusion
// text encoder: SD 1.x's CLIP ViT-L/14, SD 2.x's and SDXL's OpenCLIP),
// embedded so that `tpumesh convert CKPT.safetensors` makes a runnable model
// file from the checkpoint alone.
//
// Contract: the data is openai/CLIP's bpe_simple_vocab_16e6 merges (MIT
// licence, pipeline/data/clip-merges.LICENSE) as transformers' merges.txt
// lays them out ("#version: 0.2" header, 48,894 merges), stored gzip-
// compressed (pipeline/data/clip-merges.txt.gz, 208 KB) and inflated on
// request; vocab.json is derived from the merges as CLIP's SimpleTokenizer
// builds its vocabulary (the 256 byte symbols in GPT-2's bytes_to_unicode
// order, the same with "</w>", each merge's result, then <|startoftext|> =
// 49406 and <|endoftext|> = 49407): 49,408 ids, the published vocab.json's.
#ifndef TPUMESH_PIPELINE_CLIP_VOCAB_H_
#define TPUMESH_PIPELINE_CLIP_VOCAB_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tpumesh::pipeline {

// merges.txt, inflated (Internal if the embedded data does not inflate).
StatusOr<std::string> OpenAiClipMerges();
// vocab.json (a JSON object, token -> id) for a merges.txt whose first line
// is a header: at most 48,894 merges are used, as CLIP does.
std::string ClipVocabJsonFromMerges(std::string_view merges_txt);
// A tokenizer/ folder's four files as (dataset, text) pairs named
// "<folder>/vocab.json", ..., with `pad` as the pad token: "<|endoftext|>"
// for SD 1.x's and SDXL's first tokenizer, "!" for SD 2.x's and SDXL's
// tokenizer_2 (stabilityai's tokenizers pad with "!", an added token of its
// own id so that prompts split it out).
StatusOr<std::vector<std::pair<std::string, std::string>>> OpenAiClipTokenizerTexts(const std::string& folder,
                                                                                     const std::string& pad);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_CLIP_VOCAB_H_
