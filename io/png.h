// The images `tpumesh generate` writes: diffusers' float-to-uint8
// postprocessing, 8-bit RGB PNG files (libpng) with text chunks, written
// atomically, and diffusers.utils.make_image_grid.
//
// Contract:
// - ToUint8Image is bit-exact with diffusers + numpy on one decoded image
//   [3, H, W] f32 (checked pixel for pixel against the reference pipelines'
//   uint8 images). Every step is one f32 operation, as torch and numpy do it:
//     v = x / 2 + 0.5                  torch f32 (x * 0.5 + 0.5 is the same)
//     v = clamp(v, 0, 1)               .clamp(0, 1)
//     u = nearbyint(v * 255)           numpy_to_pil: (images * 255).round()
//   np.round rounds half to even (252.5 -> 252, 254.5 -> 254); so does
//   std::nearbyint in the default rounding mode (FE_TONEAREST, which
//   tpumesh never changes). NaN gives 0 (what numpy's astype("uint8") of a
//   NaN gives on x86). The result is HWC RGB.
// - EncodePng returns the bytes of an 8-bit RGB, non-interlaced PNG with one
//   text chunk per (keyword, value), in order, before the image data.
//   Strings are UTF-8. Keywords: 1-79 characters of printable Latin-1
//   (U+0020-U+007E, U+00A1-U+00FF), no leading, trailing or double spaces
//   (PNG's rule; libpng would otherwise rewrite them); stored as Latin-1.
//   Values: valid UTF-8 without NUL. A pure-ASCII value goes into a tEXt
//   chunk; any other (e.g. the prompt "café") into an uncompressed iTXt
//   chunk (UTF-8, empty language tag), so that no reader turns it into
//   mojibake. Anything else, or an image whose rgb.size() is not
//   height * width * 3 (both >= 1), is InvalidArgument.
//   The bytes are deterministic: no tIME chunk, zlib level 6, libpng's
//   adaptive filters; the same image and text give the same bytes (with the
//   same zlib).
// - WritePngAtomic encodes, writes a temporary file in path's directory
//   (".<name>.tmp-<pid>-<n>", mode 0666 less the umask), fsyncs it and
//   renames it onto path. There is never a partial file at path, and on any
//   failure the temporary is removed. Errors are one line naming the path,
//   e.g. "cannot write out/x.png: No such file or directory" (NotFound for
//   a missing directory, ResourceExhausted for a full disk, DataLoss for
//   EIO, InvalidArgument otherwise: permission denied, a directory at path).
// - ReadPng (for tests and tools) reads 8-bit RGB PNGs, interlaced or not;
//   any other kind is InvalidArgument ("... is a 16-bit RGB PNG; only 8-bit
//   RGB is read"). It appends the tEXt, zTXt and iTXt chunks to *text as
//   UTF-8 (keywords and tEXt/zTXt values converted from Latin-1), in file
//   order. Other ancillary chunks (gamma, tRNS, ...) are ignored.
// - MakeImageGrid is diffusers.utils.make_image_grid(images, rows, cols):
//   image i is pasted at row i / cols, column i % cols. All images must have
//   the same size and rows * cols == images.size() (else InvalidArgument;
//   diffusers asserts the count and pads/crops mismatched sizes instead).
// - GridShape(n) is the grid `generate` writes for n >= 1 images: rows = the
//   largest divisor of n that is <= sqrt(n), cols = n / rows. 8 -> 2 x 4 (the
//   seed notebook's make_image_grid(images, rows=2, cols=4)), 4 -> 2 x 2,
//   6 -> 2 x 3, 16 -> 4 x 4, a prime p -> 1 x p. n < 1 -> {0, 0}.
// - All functions are thread-safe (no shared state but an atomic counter).
#ifndef TPUMESH_IO_PNG_H_
#define TPUMESH_IO_PNG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tpumesh::pipeline {

struct Image {
  int height = 0;
  int width = 0;
  std::vector<uint8_t> rgb;  // HWC, 3 channels, row-major: (y * width + x) * 3 + c
};

// (keyword, value) pairs, UTF-8.
using TextChunks = std::vector<std::pair<std::string, std::string>>;

// `chw` holds 3 * height * width floats, channel-major (one decoded image).
Image ToUint8Image(const float* chw, int height, int width);

StatusOr<std::string> EncodePng(const Image& img, const TextChunks& text);
Status WritePngAtomic(const std::string& path, const Image& img, const TextChunks& text);
// Text chunks are appended to *text when it is not null.
StatusOr<Image> ReadPng(const std::string& path, TextChunks* text = nullptr);
// kRgbOnly: ReadPng. kGrey: any 8-bit-or-less grey, grey+alpha, RGB, RGBA
// or palette PNG as PIL's convert("L") sees it (RGB to luma by Pillow's
// rounded ITU-R 601-2 formula, alpha ignored), the grey level in all three
// channels of the Image; 16-bit PNGs are InvalidArgument. For masks.
enum class PngRead { kRgbOnly, kGrey };
StatusOr<Image> ReadPngAs(const std::string& path, PngRead mode, TextChunks* text = nullptr);

StatusOr<Image> MakeImageGrid(const std::vector<Image>& images, int rows, int cols);
// {rows, cols}.
std::pair<int, int> GridShape(int n);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_IO_PNG_H_
