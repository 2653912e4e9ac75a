#include "io/png.h"

#include "io/atomic_file.h"

#include "base/input_file.h"

#include <fcntl.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <string_view>
#include <system_error>

namespace tpumesh::pipeline {
namespace {

// ---- Text: UTF-8 <-> Latin-1 ------------------------------------------------

// Strict UTF-8 (no overlong forms, surrogates or code points > U+10FFFF).
bool DecodeUtf8(std::string_view s, std::u32string* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    char32_t cp;
    int len;
    if (b0 < 0x80) {
      cp = b0, len = 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      cp = b0 & 0x1F, len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      cp = b0 & 0x0F, len = 3;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      cp = b0 & 0x07, len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    out->push_back(cp);
    i += len;
  }
  return true;
}

std::string Latin1ToUtf8(const char* s, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
    } else {
      out.push_back(static_cast<char>(0xC0 | (b >> 6)));
      out.push_back(static_cast<char>(0x80 | (b & 0x3F)));
    }
  }
  return out;
}

// The keyword for an error message: control characters as \xNN, so that the
// message stays one line.
std::string Printable(std::string_view s) {
  std::string out;
  for (char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (b < 0x20 || b == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", b);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

// PNG keywords: 1-79 printable Latin-1 characters, no leading, trailing or
// consecutive spaces. Returns the keyword in Latin-1.
StatusOr<std::string> KeywordToLatin1(const std::string& key) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("PNG text keyword \"" + Printable(key) + "\": " + why +
                                " (keywords are 1-79 printable Latin-1 characters, no leading, trailing or double "
                                "spaces)");
  };
  std::u32string cps;
  if (!DecodeUtf8(key, &cps)) return bad("not valid UTF-8");
  if (cps.empty() || cps.size() > 79) return bad(std::to_string(cps.size()) + " characters");
  std::string latin1;
  for (char32_t cp : cps) {
    if (!((cp >= 0x20 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xFF))) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
      return bad(std::string("character ") + buf + " is not printable Latin-1");
    }
    latin1.push_back(static_cast<char>(cp));
  }
  if (cps.front() == ' ' || cps.back() == ' ') return bad("leading or trailing space");
  if (latin1.find("  ") != std::string::npos) return bad("double space");
  return latin1;
}

bool IsAscii(std::string_view s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

// ---- libpng plumbing ----------------------------------------------------------
//
// libpng reports errors by longjmp to the setjmp in png_jmpbuf. The functions
// that call setjmp (WriteBody, ReadHeader, ReadBody) hold only trivially
// destructible locals, and the callbacks libpng calls hold none when they
// longjmp; every C++ object (strings, vectors, the png structs' owners) lives
// in the callers, which a longjmp never crosses.

struct PngError {
  char message[256];
};

[[noreturn]] void OnPngError(png_structp png, png_const_charp msg) {
  auto* err = static_cast<PngError*>(png_get_error_ptr(png));
  if (err) std::snprintf(err->message, sizeof err->message, "%s", msg ? msg : "libpng error");
  png_longjmp(png, 1);
}

void OnPngWarning(png_structp, png_const_charp) {}

struct Sink {
  std::string* out;
};

void WriteToSink(png_structp png, png_bytep data, size_t n) {
  auto* sink = static_cast<Sink*>(png_get_io_ptr(png));
  bool ok = true;
  try {
    sink->out->append(reinterpret_cast<const char*>(data), n);
  } catch (const std::bad_alloc&) {
    ok = false;
  }
  if (!ok) png_error(png, "out of memory");  // outside the handler: nothing to unwind
}

void FlushSink(png_structp) {}

struct Source {
  FILE* file;
};

void ReadFromSource(png_structp png, png_bytep data, size_t n) {
  auto* src = static_cast<Source*>(png_get_io_ptr(png));
  if (std::fread(data, 1, n, src->file) != n) png_error(png, std::ferror(src->file) ? "read error" : "file is truncated");
}

struct WriteJob {
  const uint8_t* rgb;
  int height, width;
  png_textp text;
  int num_text;
  Sink* sink;
};

bool WriteBody(png_structp png, png_infop info, const WriteJob* job) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, job->sink, WriteToSink, FlushSink);
  png_set_IHDR(png, info, static_cast<png_uint_32>(job->width), static_cast<png_uint_32>(job->height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  // Fixed settings, so that the bytes do not depend on libpng's defaults.
  png_set_compression_level(png, 6);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);
  if (job->num_text > 0) png_set_text(png, info, job->text, job->num_text);
  png_write_info(png, info);
  const size_t row_bytes = static_cast<size_t>(job->width) * 3;
  for (int y = 0; y < job->height; ++y) png_write_row(png, job->rgb + static_cast<size_t>(y) * row_bytes);
  png_write_end(png, info);
  return true;
}

bool ReadHeader(png_structp png, png_infop info, Source* src) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, src, ReadFromSource);
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  return true;
}

// The transforms set so far take effect; the decoded row size is known
// after this.
bool UpdateInfo(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return true;
}

bool ReadBody(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);  // text chunks after the image data
  return true;
}

struct WriteStructs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~WriteStructs() {
    if (png) png_destroy_write_struct(&png, &info);
  }
};

struct ReadStructs {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~ReadStructs() {
    if (png) png_destroy_read_struct(&png, &info, nullptr);
  }
};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

std::string ColorTypeName(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY:
      return "grayscale";
    case PNG_COLOR_TYPE_PALETTE:
      return "palette";
    case PNG_COLOR_TYPE_RGB:
      return "RGB";
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return "grayscale+alpha";
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return "RGBA";
    default:
      return "color type " + std::to_string(color_type);
  }
}

// Largest pixel buffer ReadPng allocates (libpng's own limit is 10^6 x 10^6).
constexpr uint64_t kMaxReadBytes = uint64_t{1} << 31;

}  // namespace

Image ToUint8Image(const float* chw, int height, int width) {
  Image img;
  img.height = height;
  img.width = width;
  const size_t plane = static_cast<size_t>(std::max(height, 0)) * static_cast<size_t>(std::max(width, 0));
  img.rgb.resize(plane * 3);
  for (size_t p = 0; p < plane; ++p) {
    for (size_t c = 0; c < 3; ++c) {
      // One f32 operation per step, as torch and numpy. x / 2 is exact, so
      // even an FMA contraction of x / 2 + 0.5 would give the same v.
      float v = chw[c * plane + p] / 2.0f + 0.5f;
      if (std::isnan(v)) v = 0.0f;
      v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
      img.rgb[p * 3 + c] = static_cast<uint8_t>(std::nearbyint(v * 255.0f));  // half to even
    }
  }
  return img;
}

StatusOr<std::string> EncodePng(const Image& img, const TextChunks& text) {
  if (img.height < 1 || img.width < 1 ||
      img.rgb.size() != static_cast<size_t>(img.height) * static_cast<size_t>(img.width) * 3)
    return InvalidArgumentError("PNG: an image of " + std::to_string(img.height) + "x" + std::to_string(img.width) +
                                " needs height * width * 3 >= 3 bytes, has " + std::to_string(img.rgb.size()));
  // Latin-1 keywords and tEXt (ASCII) or iTXt (UTF-8) values; `keys` and
  // `text` own the bytes the png_text entries point at (png_set_text copies).
  std::vector<std::string> keys(text.size());
  std::vector<png_text> entries(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    TPUMESH_ASSIGN_OR_RETURN(keys[i], KeywordToLatin1(text[i].first));
    const std::string& value = text[i].second;
    std::u32string cps;
    if (!DecodeUtf8(value, &cps))
      return InvalidArgumentError("PNG text \"" + Printable(text[i].first) + "\": the value is not valid UTF-8");
    if (value.find('\0') != std::string::npos)
      return InvalidArgumentError("PNG text \"" + Printable(text[i].first) + "\": the value holds a NUL character");
    png_text& e = entries[i];
    std::memset(&e, 0, sizeof e);
    e.key = keys[i].data();
    e.text = const_cast<char*>(value.c_str());
    if (IsAscii(value)) {
      e.compression = PNG_TEXT_COMPRESSION_NONE;  // tEXt
      e.text_length = value.size();
    } else {
      e.compression = PNG_ITXT_COMPRESSION_NONE;  // iTXt, UTF-8
      e.itxt_length = value.size();
      e.lang = const_cast<char*>("");
      e.lang_key = const_cast<char*>("");
    }
  }

  std::string out;
  PngError err{};
  Sink sink{&out};
  WriteStructs s;
  s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, OnPngError, OnPngWarning);
  if (s.png) s.info = png_create_info_struct(s.png);
  if (!s.png || !s.info) return ResourceExhaustedError("PNG: cannot create the libpng encoder (out of memory)");
  const WriteJob job{img.rgb.data(), img.height, img.width, entries.data(), static_cast<int>(entries.size()), &sink};
  if (!WriteBody(s.png, s.info, &job)) return InternalError(std::string("PNG encoding failed: ") + err.message);
  return out;
}

Status WritePngAtomic(const std::string& path, const Image& img, const TextChunks& text) {
  if (path.empty()) return InvalidArgumentError("cannot write a PNG to an empty path");
  TPUMESH_ASSIGN_OR_RETURN(std::string bytes, EncodePng(img, text));
  return WriteFileAtomic(path, bytes);
}

namespace {

// PIL's convert("L") of an RGB pixel: ITU-R 601-2 luma in 16-bit fixed point,
// rounded (Pillow's L24).
uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

}  // namespace

StatusOr<Image> ReadPng(const std::string& path, TextChunks* text) { return ReadPngAs(path, PngRead::kRgbOnly, text); }

StatusOr<Image> ReadPngAs(const std::string& path, PngRead mode, TextChunks* text) {
  TPUMESH_ASSIGN_OR_RETURN(InputFile input, InputFile::Open(path));
  const int64_t input_size = input.size();
  std::unique_ptr<FILE, FileCloser> file(::fdopen(input.fd(), "rb"));
  if (!file) return ErrnoStatus("cannot read " + path, errno);
  input.Release();  // the FILE owns the descriptor now
  png_byte signature[8];
  if (std::fread(signature, 1, 8, file.get()) != 8 || png_sig_cmp(signature, 0, 8) != 0)
    return InvalidArgumentError(path + ": not a PNG file");

  PngError err{};
  ReadStructs s;
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, OnPngError, OnPngWarning);
  if (s.png) s.info = png_create_info_struct(s.png);
  if (!s.png || !s.info) return ResourceExhaustedError(path + ": cannot create the libpng decoder (out of memory)");
  Source src{file.get()};
  if (!ReadHeader(s.png, s.info, &src)) return DataLossError(path + ": " + err.message);

  const png_uint_32 width = png_get_image_width(s.png, s.info), height = png_get_image_height(s.png, s.info);
  const int depth = png_get_bit_depth(s.png, s.info), color = png_get_color_type(s.png, s.info);
  if (mode == PngRead::kRgbOnly) {
    if (depth != 8 || color != PNG_COLOR_TYPE_RGB)
      return InvalidArgumentError(path + ": a " + std::to_string(depth) + "-bit " + ColorTypeName(color) +
                                  " PNG; only 8-bit RGB PNGs are read");
  } else {
    if (depth > 8)
      return InvalidArgumentError(path + ": a " + std::to_string(depth) + "-bit " + ColorTypeName(color) +
                                  " PNG; masks are read from 8-bit (or fewer) grey, RGB or palette PNGs");
    // Every kind to 8-bit grey or RGB, alpha dropped (PIL's convert("L")
    // ignores it too). Expanding a palette also turns a tRNS chunk into an
    // alpha channel, so alpha is stripped whatever the colour type says.
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s.png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(s.png);
    png_set_strip_alpha(s.png);
  }
  if (uint64_t{width} * height * 3 > kMaxReadBytes)
    return InvalidArgumentError(path + ": " + std::to_string(height) + "x" + std::to_string(width) +
                                " pixels is more than ReadPng reads");
  // Deflate packs at most 1032 bytes into one: a file too small to hold its
  // declared pixels is refused before they are allocated (a PNG bomb or a
  // truncated file).
  const uint64_t stored_row = (uint64_t{width} * png_get_channels(s.png, s.info) * depth + 7) / 8 + 1;
  if (static_cast<uint64_t>(input_size) * 1032 < stored_row * height)
    return InvalidArgumentError(path + ": declares " + std::to_string(height) + "x" + std::to_string(width) +
                                " pixels but holds only " + std::to_string(input_size) +
                                " bytes, too few for them even at deflate's best (truncated, or a PNG bomb)");
  if (!UpdateInfo(s.png, s.info)) return DataLossError(path + ": " + err.message);
  // Rows are sized by what libpng will write after its transforms, and the
  // result must be 8-bit grey or RGB: anything else is refused, never read
  // into a buffer of another size.
  const int channels = png_get_channels(s.png, s.info);
  const size_t row_bytes = png_get_rowbytes(s.png, s.info);
  if (png_get_bit_depth(s.png, s.info) != 8 || (channels != 1 && channels != 3) ||
      (mode == PngRead::kRgbOnly && channels != 3) || row_bytes != static_cast<size_t>(width) * channels)
    return InvalidArgumentError(path + ": a " + std::to_string(depth) + "-bit " + ColorTypeName(color) +
                                " PNG decodes to " + std::to_string(channels) + " channels of " +
                                std::to_string(png_get_bit_depth(s.png, s.info)) + " bits; not read");
  Image img;
  img.height = static_cast<int>(height);
  img.width = static_cast<int>(width);
  std::vector<uint8_t> pixels(row_bytes * height);
  std::vector<png_bytep> rows(height);
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = pixels.data() + static_cast<size_t>(y) * row_bytes;
  if (!ReadBody(s.png, s.info, rows.data())) return DataLossError(path + ": " + err.message);
  if (mode == PngRead::kRgbOnly) {
    img.rgb = std::move(pixels);
  } else {
    img.rgb.resize(static_cast<size_t>(width) * height * 3);
    for (size_t p = 0; p < static_cast<size_t>(width) * height; ++p) {
      const uint8_t l = channels == 1 ? pixels[p] : Luma(&pixels[p * 3]);
      img.rgb[p * 3] = img.rgb[p * 3 + 1] = img.rgb[p * 3 + 2] = l;
    }
  }

  if (text) {
    png_textp chunks = nullptr;
    const int n = png_get_text(s.png, s.info, &chunks, nullptr);
    for (int i = 0; i < n; ++i) {
      const png_text& c = chunks[i];
      const bool utf8 = c.compression == PNG_ITXT_COMPRESSION_NONE || c.compression == PNG_ITXT_COMPRESSION_zTXt;
      const char* value = c.text ? c.text : "";
      text->emplace_back(Latin1ToUtf8(c.key, std::strlen(c.key)),
                         utf8 ? std::string(value, c.text ? c.itxt_length : 0)
                              : Latin1ToUtf8(value, c.text ? c.text_length : 0));
    }
  }
  return img;
}

StatusOr<Image> MakeImageGrid(const std::vector<Image>& images, int rows, int cols) {
  if (rows < 1 || cols < 1 || static_cast<int64_t>(rows) * cols != static_cast<int64_t>(images.size()))
    return InvalidArgumentError("image grid of " + std::to_string(rows) + "x" + std::to_string(cols) + " needs " +
                                std::to_string(static_cast<int64_t>(std::max(rows, 0)) * std::max(cols, 0)) +
                                " images, got " + std::to_string(images.size()));
  const int h = images[0].height, w = images[0].width;
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& im = images[i];
    if (im.height != h || im.width != w)
      return InvalidArgumentError("image grid: image " + std::to_string(i) + " is " + std::to_string(im.height) +
                                  "x" + std::to_string(im.width) + ", image 0 is " + std::to_string(h) + "x" +
                                  std::to_string(w) + " (all must be the same size)");
    if (h < 1 || w < 1 || im.rgb.size() != static_cast<size_t>(h) * static_cast<size_t>(w) * 3)
      return InvalidArgumentError("image grid: image " + std::to_string(i) + " of " + std::to_string(h) + "x" +
                                  std::to_string(w) + " has " + std::to_string(im.rgb.size()) + " bytes");
  }
  Image grid;
  grid.height = rows * h;
  grid.width = cols * w;
  grid.rgb.resize(static_cast<size_t>(grid.height) * static_cast<size_t>(grid.width) * 3);
  const size_t row_bytes = static_cast<size_t>(w) * 3;
  for (size_t i = 0; i < images.size(); ++i) {
    const size_t r = i / static_cast<size_t>(cols), c = i % static_cast<size_t>(cols);
    for (size_t y = 0; y < static_cast<size_t>(h); ++y)
      std::memcpy(grid.rgb.data() + ((r * h + y) * grid.width + c * w) * 3, images[i].rgb.data() + y * row_bytes,
                  row_bytes);
  }
  return grid;
}

std::pair<int, int> GridShape(int n) {
  if (n < 1) return {0, 0};
  int rows = 1;
  for (int r = 1; static_cast<int64_t>(r) * r <= n; ++r)
    if (n % r == 0) rows = r;
  return {rows, n / rows};
}

}  // namespace tpumesh::pipeline
