// Files compiled into the binary (cmake/EmbedFiles.cmake): the tokenizer of
// the built-in `tiny` architecture, so the default model needs no download.
#ifndef TPUMESH_TEXT_EMBEDDED_H_
#define TPUMESH_TEXT_EMBEDDED_H_

#include <string_view>

namespace tpumesh::pipeline::embedded {

std::string_view TinyTokenizer_vocab_json();
std::string_view TinyTokenizer_merges_txt();
std::string_view TinyTokenizer_special_tokens_map_json();
std::string_view TinyTokenizer_tokenizer_config_json();

}  // namespace tpumesh::pipeline::embedded

#endif  // TPUMESH_TEXT_EMBEDDED_H_
