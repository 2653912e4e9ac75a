#include "pipeline/default_model.h"

#include <algorithm>
#include <cctype>

// The file's bytes between two symbols, placed by the assembler at build
// time (TPUMESH_DEFAULT_MODEL_FILE: its absolute path, from CMake).
__asm__(
    "  .section .rodata\n"
    "  .balign 64\n"
    "tpumesh_default_model_begin:\n"
    "  .incbin \"" TPUMESH_DEFAULT_MODEL_FILE "\"\n"
    "tpumesh_default_model_end:\n"
    "  .previous\n");
extern "C" const char tpumesh_default_model_begin[];
extern "C" const char tpumesh_default_model_end[];

namespace tpumesh::pipeline {

std::string_view DefaultModelBytes() {
  return std::string_view(tpumesh_default_model_begin,
                          static_cast<size_t>(tpumesh_default_model_end - tpumesh_default_model_begin));
}

std::vector<std::string> UnknownWords(std::string_view prompt, const std::vector<std::string>& vocabulary) {
  std::vector<std::string> unknown;
  std::string word;
  auto flush = [&] {
    if (!word.empty() && std::find(vocabulary.begin(), vocabulary.end(), word) == vocabulary.end() &&
        std::find(unknown.begin(), unknown.end(), word) == unknown.end())
      unknown.push_back(word);
    word.clear();
  };
  for (char c : prompt) {
    if (std::isalpha(static_cast<unsigned char>(c)))
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else
      flush();
  }
  flush();
  return unknown;
}

}  // namespace tpumesh::pipeline
