#include "pipeline/png.h"

#include <png.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tpumesh::pipeline {
namespace {

bool IsAscii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

struct WriteState {
  std::string* out;
};

void WriteToString(png_structp png, png_bytep data, png_size_t n) {
  auto* st = static_cast<WriteState*>(png_get_io_ptr(png));
  st->out->append(reinterpret_cast<const char*>(data), n);
}
void FlushNothing(png_structp) {}

void OnPngError(png_structp png, png_const_charp msg) {
  auto* err = static_cast<std::string*>(png_get_error_ptr(png));
  if (err) *err = msg;
  png_longjmp(png, 1);
}
void OnPngWarning(png_structp, png_const_charp) {}

// The setjmp-protected part: only plain C data lives across the longjmp.
bool EncodeC(const Image& img, png_text* texts, int ntext, WriteState* st, std::string* err) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, err, OnPngError, OnPngWarning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, st, WriteToString, FlushNothing);
  png_set_compression_level(png, 6);
  png_set_IHDR(png, info, img.width, img.height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (ntext > 0) png_set_text(png, info, texts, ntext);
  png_write_info(png, info);
  for (int y = 0; y < img.height; ++y)
    png_write_row(png, const_cast<png_bytep>(img.rgb.data() + static_cast<size_t>(y) * img.width * 3));
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return true;
}

struct ReadState {
  const std::string* in;
  size_t pos;
};

void ReadFromString(png_structp png, png_bytep data, png_size_t n) {
  auto* st = static_cast<ReadState*>(png_get_io_ptr(png));
  if (st->pos + n > st->in->size()) png_error(png, "file truncated");
  std::memcpy(data, st->in->data() + st->pos, n);
  st->pos += n;
}

bool DecodeC(ReadState* st, Image* img, TextChunks* text, std::string* err) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, err, OnPngError, OnPngWarning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, st, ReadFromString);
  png_read_info(png, info);
  if (png_get_bit_depth(png, info) != 8 || png_get_color_type(png, info) != PNG_COLOR_TYPE_RGB) {
    *err = "not an 8-bit RGB PNG";
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  img->width = static_cast<int>(png_get_image_width(png, info));
  img->height = static_cast<int>(png_get_image_height(png, info));
  img->rgb.resize(static_cast<size_t>(img->width) * img->height * 3);
  for (int y = 0; y < img->height; ++y) png_read_row(png, img->rgb.data() + static_cast<size_t>(y) * img->width * 3, nullptr);
  png_read_end(png, info);
  if (text) {
    png_textp t = nullptr;
    const int n = png_get_text(png, info, &t, nullptr);
    for (int i = 0; i < n; ++i) {
      text->emplace_back(t[i].key, std::string(t[i].text ? t[i].text : ""));
    }
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

Image ToUint8Image(const float* chw, int height, int width) {
  Image img;
  img.height = height;
  img.width = width;
  img.rgb.resize(static_cast<size_t>(height) * width * 3);
  const size_t plane = static_cast<size_t>(height) * width;
  for (int c = 0; c < 3; ++c) {
    for (size_t p = 0; p < plane; ++p) {
      const float x = chw[c * plane + p];
      float v = x / 2.0f + 0.5f;                  // torch f32: (image / 2 + 0.5)
      v = std::isnan(v) ? 0.0f : v;
      v = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);  // .clamp(0, 1)
      const float scaled = v * 255.0f;            // numpy f32: images * 255
      img.rgb[p * 3 + c] = static_cast<uint8_t>(std::nearbyint(scaled));  // .round(): half to even
    }
  }
  return img;
}

StatusOr<std::string> EncodePng(const Image& img, const TextChunks& text) {
  if (img.height <= 0 || img.width <= 0 || img.rgb.size() != static_cast<size_t>(img.height) * img.width * 3)
    return InvalidArgumentError("PNG: image of " + std::to_string(img.height) + "x" + std::to_string(img.width) +
                                " with " + std::to_string(img.rgb.size()) + " bytes");
  std::vector<png_text> texts(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const std::string& key = text[i].first;
    if (key.empty() || key.size() > 79 || !IsAscii(key))
      return InvalidArgumentError("PNG: text keyword '" + key + "' must be 1-79 ASCII characters");
    png_text& t = texts[i];
    std::memset(&t, 0, sizeof t);
    t.key = const_cast<char*>(key.c_str());
    t.text = const_cast<char*>(text[i].second.c_str());
    if (IsAscii(text[i].second)) {
      t.compression = PNG_TEXT_COMPRESSION_NONE;
      t.text_length = text[i].second.size();
    } else {
      t.compression = PNG_ITXT_COMPRESSION_NONE;
      t.itxt_length = text[i].second.size();
      t.lang = const_cast<char*>("");
      t.lang_key = const_cast<char*>("");
    }
  }
  std::string out, err;
  WriteState st{&out};
  if (!EncodeC(img, texts.data(), static_cast<int>(texts.size()), &st, &err))
    return InternalError("PNG encoding failed: " + err);
  return out;
}

Status WritePngAtomic(const std::string& path, const Image& img, const TextChunks& text) {
  TPUMESH_ASSIGN_OR_RETURN(std::string bytes, EncodePng(img, text));
  const std::string temp = path + ".tmp-" + std::to_string(getpid());
  FILE* f = std::fopen(temp.c_str(), "wb");
  if (!f) return InvalidArgumentError("cannot write " + path + ": " + std::strerror(errno));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(temp.c_str());
    return InternalError("cannot write " + path + ": " + std::strerror(ok ? errno : saved));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(temp.c_str());
    return InternalError("cannot write " + path + ": " + std::strerror(e));
  }
  return OkStatus();
}

StatusOr<Image> ReadPng(const std::string& path, TextChunks* text) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFoundError("cannot read " + path + ": " + std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) != 0)
    return InvalidArgumentError(path + ": not a PNG file");
  Image img;
  std::string err;
  ReadState st{&bytes, 0};
  if (!DecodeC(&st, &img, text, &err)) return InvalidArgumentError(path + ": " + err);
  return img;
}

StatusOr<Image> MakeImageGrid(const std::vector<Image>& images, int rows, int cols) {
  if (rows < 1 || cols < 1 || static_cast<size_t>(rows) * cols != images.size())
    return InvalidArgumentError("image grid of " + std::to_string(rows) + "x" + std::to_string(cols) + " for " +
                                std::to_string(images.size()) + " images");
  const int h = images[0].height, w = images[0].width;
  for (const Image& im : images)
    if (im.height != h || im.width != w)
      return InvalidArgumentError("image grid: images of different sizes (" + std::to_string(h) + "x" +
                                  std::to_string(w) + " and " + std::to_string(im.height) + "x" +
                                  std::to_string(im.width) + ")");
  Image g;
  g.height = rows * h;
  g.width = cols * w;
  g.rgb.resize(static_cast<size_t>(g.height) * g.width * 3);
  for (size_t i = 0; i < images.size(); ++i) {
    const int r = static_cast<int>(i) / cols, c = static_cast<int>(i) % cols;
    for (int y = 0; y < h; ++y)
      std::memcpy(g.rgb.data() + ((static_cast<size_t>(r) * h + y) * g.width + static_cast<size_t>(c) * w) * 3,
                  images[i].rgb.data() + static_cast<size_t>(y) * w * 3, static_cast<size_t>(w) * 3);
  }
  return g;
}

std::pair<int, int> GridShape(int n) {
  int rows = 1;
  for (int r = 1; r * r <= n; ++r)
    if (n % r == 0) rows = r;
  return {rows, n / std::max(rows, 1)};
}

}  // namespace tpumesh::pipeline
