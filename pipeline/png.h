// Images out of the pipeline: diffusers' float-to-uint8 conversion, PNG files
// (libpng) with text chunks, and make_image_grid.
//
// Contract:
// - ToUint8Image is the pipeline's postprocessing of one decoded image
//   [3, H, W] f32, in f32 as torch/numpy compute it: v = x / 2 + 0.5,
//   clamped to [0, 1] (NaN -> 0), then numpy_to_pil's round(v * 255) with
//   round half to even. The result is HWC RGB.
// - EncodePng is deterministic: 8-bit RGB, no time chunk, fixed zlib level;
//   the same image and text give the same bytes. A text whose value is pure
//   ASCII/Latin-1-free of high bytes goes into a tEXt chunk; one with
//   non-ASCII UTF-8 (e.g. "café") into an iTXt chunk, so that it survives.
//   Keywords are 1-79 printable Latin-1 characters (InvalidArgument else).
// - WritePngAtomic writes a temporary file beside `path` and renames it into
//   place: there is never a partial PNG at `path`; errors name the path.
// - Thread-safe (no shared state).
#ifndef TPUMESH_PIPELINE_PNG_H_
#define TPUMESH_PIPELINE_PNG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tpumesh::pipeline {

struct Image {
  int height = 0;
  int width = 0;
  std::vector<uint8_t> rgb;  // HWC, 3 channels, row-major
};

using TextChunks = std::vector<std::pair<std::string, std::string>>;

Image ToUint8Image(const float* chw, int height, int width);

StatusOr<std::string> EncodePng(const Image& image, const TextChunks& text);
Status WritePngAtomic(const std::string& path, const Image& image, const TextChunks& text);
// 8-bit RGB PNGs only (others: InvalidArgument); text chunks into *text.
StatusOr<Image> ReadPng(const std::string& path, TextChunks* text = nullptr);

// diffusers.utils.make_image_grid: image i at row i / cols, column i % cols.
// All images the same size, rows * cols == images.size().
StatusOr<Image> MakeImageGrid(const std::vector<Image>& images, int rows, int cols);
// The grid generate writes for n images: rows = the largest divisor of n
// that is <= sqrt(n), cols = n / rows (8 -> 2 x 4, as the seed notebook).
std::pair<int, int> GridShape(int n);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_PNG_H_
