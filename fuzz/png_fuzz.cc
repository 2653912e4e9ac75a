// The PNG reader (io/png.h) on any bytes, as an init image (8-bit RGB only)
// and as a mask (every colour type to grey): it returns an image whose
// buffer is exactly height x width x 3 bytes, or an error; never a crash, a
// read or write out of bounds, or an allocation the file cannot back.
// Seeds (fuzz/corpus/png): scripts/tools/make_png_cases.py's palette, tRNS,
// grey+alpha, 1-16-bit and interlaced images.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_util.h"
#include "io/png.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpumesh::fuzz::MemFile file(data, size);
  for (auto mode : {tpumesh::pipeline::PngRead::kRgbOnly, tpumesh::pipeline::PngRead::kGrey}) {
    tpumesh::pipeline::TextChunks text;
    auto img = tpumesh::pipeline::ReadPngAs(file.path(), mode, &text);
    if (img.ok() && img->rgb.size() != static_cast<size_t>(img->height) * static_cast<size_t>(img->width) * 3)
      std::abort();
  }
  return 0;
}
