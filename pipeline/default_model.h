// The embedded default model: a tiny Stable-Diffusion-shaped model trained
// by scripts/train_default on synthetic pictures of one coloured shape on a
// coloured background ("a red circle on a blue background"), converted with
// `tpumesh convert` (f32) and compiled into the binary (pipeline/data/
// default-model.h5, included by the assembler's .incbin). `generate` without
// --model runs it.
#ifndef TPUMESH_PIPELINE_DEFAULT_MODEL_H_
#define TPUMESH_PIPELINE_DEFAULT_MODEL_H_

#include <string>
#include <string_view>
#include <vector>

namespace tpumesh::pipeline {

// The model file's bytes (an HDF5 tpumesh model file).
std::string_view DefaultModelBytes();

// How reports and logs name it.
inline constexpr char kDefaultModelName[] = "shapes (embedded default, trained by scripts/train_default)";

// The words of `prompt` (lower-cased runs of letters) that are not in
// `vocabulary`, each once, in order of first appearance.
std::vector<std::string> UnknownWords(std::string_view prompt, const std::vector<std::string>& vocabulary);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_DEFAULT_MODEL_H_
