// io/png.h: diffusers' uint8 conversion against the reference pipelines
// pixel for pixel, PNG round trips with tEXt/iTXt text, deterministic bytes,
// make_image_grid's layout and GridShape, and the errors (no file left).
#include "io/png.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/golden.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Pseudo-random bytes (an LCG), so that the PNGs are not trivially compressible.
Image Noise(int h, int w, uint32_t seed) {
  Image img{h, w, std::vector<uint8_t>(static_cast<size_t>(h) * w * 3)};
  uint32_t s = seed * 2654435761u + 1;
  for (uint8_t& b : img.rgb) {
    s = s * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(s >> 24);
  }
  return img;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::set<std::string> Files(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

uint32_t Be32(const std::string& s, size_t pos) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[pos + i]);
  return v;
}

// The chunk types of a PNG, in order.
std::vector<std::string> ChunkTypes(const std::string& png) {
  std::vector<std::string> types;
  for (size_t pos = 8; pos + 12 <= png.size(); pos += 12 + Be32(png, pos)) {
    const std::string type = png.substr(pos + 4, 4);
    if (types.empty() || types.back() != type || type != "IDAT") types.push_back(type);
  }
  return types;
}

uint32_t Crc32(const std::string& s, size_t begin, size_t end) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = begin; i < end; ++i) {
    c ^= static_cast<uint8_t>(s[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A valid PNG whose IHDR claims another bit depth / color type.
std::string WithIhdr(std::string png, int depth, int color_type) {
  png[24] = static_cast<char>(depth);
  png[25] = static_cast<char>(color_type);
  const uint32_t crc = Crc32(png, 12, 29);  // "IHDR" + 13 bytes of data
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  return png;
}

// ---- ToUint8Image --------------------------------------------------------------

// numpy_to_pil(((decoded / 2 + 0.5).clamp(0, 1)).permute(0, 2, 3, 1).numpy())
// as diffusers computed it, for the VAE alone and for whole pipelines.
TEST(PngTest, Uint8ConversionEqualsDiffusersOnEveryPixel) {
  const std::string golden = tpumesh::testing::RefdataDir() + "/tiny-sd-a/golden.h5";
  TPUMESH_REQUIRE_REFDATA(golden);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"vae_decode/decoded", "vae_decode/image_uint8"},
      {"pipeline_pndm/decoded", "pipeline_pndm/images_uint8"},
      {"pipeline_ddim/decoded", "pipeline_ddim/images_uint8"},
      {"pipeline_euler/decoded", "pipeline_euler/images_uint8"},
  };
  for (const auto& [in, out] : pairs) {
    const mesh::Array decoded = tpumesh::testing::ReadDataset(golden, in);  // [B, 3, H, W] f32
    const mesh::Array want = tpumesh::testing::ReadDataset(golden, out);    // [B, H, W, 3] as s32
    ASSERT_EQ(decoded.rank(), 4) << in;
    ASSERT_EQ(want.rank(), 4) << out;
    const int64_t b = decoded.dim(0), h = decoded.dim(2), w = decoded.dim(3);
    ASSERT_EQ(decoded.dim(1), 3) << in;
    ASSERT_EQ(want.dim(0), b) << out;
    ASSERT_EQ(want.dim(1), h) << out;
    ASSERT_EQ(want.dim(2), w) << out;
    ASSERT_EQ(want.dim(3), 3) << out;
    int64_t mismatches = 0;
    for (int64_t i = 0; i < b; ++i) {
      const float* chw = decoded.data<float>() + i * 3 * h * w;
      const Image img = ToUint8Image(chw, static_cast<int>(h), static_cast<int>(w));
      ASSERT_EQ(img.rgb.size(), static_cast<size_t>(h * w * 3));
      for (int64_t j = 0; j < h * w * 3; ++j) {
        const int32_t expected = want.data<int32_t>()[i * h * w * 3 + j];
        if (img.rgb[j] != expected && ++mismatches <= 5)
          ADD_FAILURE() << out << " image " << i << " pixel " << j / 3 << " channel " << j % 3 << ": got "
                        << int{img.rgb[j]} << ", diffusers " << expected << " from "
                        << chw[(j % 3) * h * w + j / 3];
      }
    }
    EXPECT_EQ(mismatches, 0) << out;
  }
}

TEST(PngTest, RoundsHalfToEvenLikeNpRound) {
  // Inputs whose f32 v * 255 is exactly k + 0.5 (found by enumerating f32):
  // np.round gives the even neighbour; round-half-up would not.
  struct Case {
    float x;
    float scaled;
    int want;
  };
  const Case cases[] = {
      {0x1.fdfdfcp-1f, 254.5f, 254},
      {0x1.f5f5f4p-1f, 252.5f, 252},
      {0x1.050504p-1f, 192.5f, 192},
      {0.0f, 127.5f, 128},
  };
  for (const Case& c : cases) {
    const float v = std::min(std::max(c.x / 2.0f + 0.5f, 0.0f), 1.0f);
    ASSERT_EQ(v * 255.0f, c.scaled) << c.x;  // the input really is a tie
    std::vector<float> chw(3, c.x);
    const Image img = ToUint8Image(chw.data(), 1, 1);
    EXPECT_THAT(img.rgb, ElementsAre(c.want, c.want, c.want)) << c.x;
  }
}

TEST(PngTest, ClampsAndMapsNanToZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-1.0f, 1.0f, -5.0f, 5.0f, -inf, inf, std::nanf(""), -0.0f};
  const std::vector<int> want = {0, 255, 0, 255, 0, 255, 0, 128};
  std::vector<float> chw;
  for (int c = 0; c < 3; ++c) chw.insert(chw.end(), x.begin(), x.end());
  const Image img = ToUint8Image(chw.data(), 1, static_cast<int>(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(img.rgb[i * 3 + c], want[i]) << "x = " << x[i];
}

TEST(PngTest, ConvertsChwToHwc) {
  // [3, 2, 2]: channel c, pixel p holds the value that maps to 10 * c + p.
  std::vector<float> chw(12);
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 4; ++p) chw[c * 4 + p] = 2.0f * ((10 * c + p) / 255.0f) - 1.0f;
  const Image img = ToUint8Image(chw.data(), 2, 2);
  EXPECT_EQ(img.height, 2);
  EXPECT_EQ(img.width, 2);
  EXPECT_THAT(img.rgb, ElementsAre(0, 10, 20, 1, 11, 21, 2, 12, 22, 3, 13, 23));
}

// ---- PNG files -----------------------------------------------------------------

TEST(PngTest, RoundTripsPixelsAndText) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string path = dir + "/rt.png";
  const Image img = Noise(17, 23, 1);
  const TextChunks text = {
      {"parameters", "a café at night, 東京 🌃\nNegative prompt: \nSteps: 50"},
      {"Software", "tpumesh"},
      {"Légende", "crème brûlée"},
      {"Empty", ""},
  };
  ASSERT_TRUE(WritePngAtomic(path, img, text).ok());
  TextChunks got_text;
  auto got = ReadPng(path, &got_text);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->height, 17);
  EXPECT_EQ(got->width, 23);
  EXPECT_EQ(got->rgb, img.rgb);
  EXPECT_EQ(got_text, text);
  EXPECT_EQ(Files(dir), std::set<std::string>{"rt.png"});  // no temporary left

  // ASCII values in tEXt, others in iTXt; keywords in Latin-1; no tIME.
  const std::string bytes = Slurp(path);
  EXPECT_THAT(ChunkTypes(bytes), ElementsAre("IHDR", "iTXt", "tEXt", "iTXt", "tEXt", "IDAT", "IEND"));
  EXPECT_THAT(bytes, HasSubstr(std::string("L\xE9gende\0", 9)));
  EXPECT_THAT(bytes, HasSubstr("a caf\xC3\xA9 at night"));

  // Without text: no text chunks, and *text untouched when null.
  ASSERT_TRUE(WritePngAtomic(path, img, {}).ok());
  EXPECT_THAT(ChunkTypes(Slurp(path)), ElementsAre("IHDR", "IDAT", "IEND"));
  auto plain = ReadPng(path);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->rgb, img.rgb);
}

TEST(PngTest, BytesAreDeterministic) {
  const Image img = Noise(64, 48, 2);
  const TextChunks text = {{"parameters", "a café, seed 7"}};
  auto a = EncodePng(img, text), b = EncodePng(img, text);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->substr(0, 8), std::string("\x89PNG\r\n\x1A\n", 8));
  for (const std::string& t : ChunkTypes(*a)) EXPECT_NE(t, "tIME");
  // The file holds exactly the encoded bytes.
  const std::string path = tpumesh::testing::TestTempDir() + "/d.png";
  ASSERT_TRUE(WritePngAtomic(path, img, text).ok());
  EXPECT_EQ(Slurp(path), *a);
  // And the text is part of them.
  auto c = EncodePng(img, {{"parameters", "a café, seed 8"}});
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c);
}

TEST(PngTest, OverwritesAnExistingFileWithUmaskMode) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const std::string path = dir + "/x.png";
  ASSERT_TRUE(WritePngAtomic(path, Noise(4, 4, 1), {{"k", "first"}}).ok());
  ASSERT_TRUE(WritePngAtomic(path, Noise(5, 3, 2), {{"k", "second"}}).ok());
  TextChunks text;
  auto got = ReadPng(path, &text);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->rgb, Noise(5, 3, 2).rgb);
  EXPECT_EQ(text, (TextChunks{{"k", "second"}}));
  EXPECT_EQ(Files(dir), std::set<std::string>{"x.png"});
  const mode_t mask = umask(022);
  umask(mask);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

TEST(PngTest, RejectsBadKeywordsValuesAndImages) {
  const Image img = Noise(2, 2, 0);
  const std::vector<std::string> bad_keys = {
      "", std::string(80, 'k'), " lead", "trail ", "two  spaces", "tab\there", "new\nline", "東京", "\x7F",
      "\xA0nbsp", std::string("bad\xC3", 4)};
  for (const std::string& k : bad_keys) {
    auto s = EncodePng(img, {{k, "v"}});
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << k;
    EXPECT_THAT(s.status().message(), HasSubstr("keyword")) << k;
    EXPECT_EQ(s.status().message().find('\n'), std::string::npos) << "one line";
  }
  EXPECT_TRUE(EncodePng(img, {{std::string(79, 'k'), "v"}}).ok());
  EXPECT_TRUE(EncodePng(img, {{"ÿ ok ¡", "v"}}).ok());
  EXPECT_THAT(EncodePng(img, {{"k", std::string("a\0b", 3)}}).status().message(), HasSubstr("NUL"));
  EXPECT_THAT(EncodePng(img, {{"k", "\xFF\xFE"}}).status().message(), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(EncodePng(img, {{"k", "\xED\xA0\x80"}}).status().message(), HasSubstr("not valid UTF-8"));  // surrogate

  Image short_rgb = img;
  short_rgb.rgb.pop_back();
  EXPECT_EQ(EncodePng(short_rgb, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePng(Image{}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PngTest, ReadPngRejectsOtherPngsAndDamagedFiles) {
  const std::string dir = tpumesh::testing::TestTempDir();
  auto png = EncodePng(Noise(32, 32, 3), {});
  ASSERT_TRUE(png.ok());

  Spit(dir + "/rgba.png", WithIhdr(*png, 8, 6));
  auto s = ReadPng(dir + "/rgba.png");
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), dir + "/rgba.png: a 8-bit RGBA PNG; only 8-bit RGB PNGs are read");
  Spit(dir + "/rgb16.png", WithIhdr(*png, 16, 2));
  EXPECT_THAT(ReadPng(dir + "/rgb16.png").status().message(), HasSubstr("16-bit RGB PNG; only 8-bit RGB"));
  Spit(dir + "/gray.png", WithIhdr(*png, 8, 0));
  EXPECT_THAT(ReadPng(dir + "/gray.png").status().message(), HasSubstr("8-bit grayscale PNG"));

  Spit(dir + "/cut.png", png->substr(0, png->size() / 2));
  s = ReadPng(dir + "/cut.png");
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.status().message(), dir + "/cut.png: file is truncated");

  Spit(dir + "/not.png", "hello, world");
  EXPECT_EQ(ReadPng(dir + "/not.png").status().message(), dir + "/not.png: not a PNG file");
  s = ReadPng(dir + "/missing.png");
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), dir + "/missing.png: no such file");
}

// Every colour type, bit depth and transparency kind as a mask
// (tests/data/png, made by scripts/tools/make_png_cases.py: a white 16x16
// square at (8, 8) on black, 32x32). A palette with tRNS once overflowed the
// row buffer: libpng's palette expansion adds an alpha byte a pixel.
TEST(PngTest, MasksOfEveryColourTypeReadAsGreyOrAreRefused) {
  const std::string data = std::string(TPUMESH_SOURCE_DIR) + "/tests/data/png";
  int read = 0;
  for (const auto& e : std::filesystem::directory_iterator(data)) {
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    auto img = ReadPngAs(e.path().string(), PngRead::kGrey);
    if (name.find("16bit") != std::string::npos) {
      EXPECT_EQ(img.status().code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(img.status().message(), HasSubstr("16-bit"));
      continue;
    }
    ASSERT_TRUE(img.ok()) << img.status().message();
    ASSERT_EQ(img->height, 32);
    ASSERT_EQ(img->width, 32);
    ASSERT_EQ(img->rgb.size(), 32u * 32 * 3);
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c) {
          const bool inside = x >= 8 && x < 24 && y >= 8 && y < 24;
          ASSERT_EQ(img->rgb[(static_cast<size_t>(y) * 32 + x) * 3 + c], inside ? 255 : 0) << x << "," << y;
        }
    ++read;
  }
  EXPECT_EQ(read, 13);
  // As an init image (8-bit RGB only): a palette is refused; RGB with a
  // tRNS chunk is read as its RGB (the chunk ignored).
  EXPECT_THAT(ReadPng(data + "/palette_trns.png").status().message(), HasSubstr("only 8-bit RGB PNGs are read"));
  auto rgb = ReadPng(data + "/rgb_trns.png");
  ASSERT_TRUE(rgb.ok()) << rgb.status().message();
  ASSERT_EQ(rgb->rgb.size(), 32u * 32 * 3);
  EXPECT_EQ(rgb->rgb[(10 * 32 + 10) * 3], 255);
  EXPECT_EQ(rgb->rgb[0], 0);
}

TEST(PngTest, AFifoOrDeviceIsRefusedWithoutBlocking) {
  const std::string dir = tpumesh::testing::TestTempDir();
  ASSERT_EQ(mkfifo((dir + "/fifo.png").c_str(), 0600), 0);
  for (PngRead mode : {PngRead::kRgbOnly, PngRead::kGrey}) {
    auto s = ReadPngAs(dir + "/fifo.png", mode);  // blocked forever in open() before
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), dir + "/fifo.png: not a regular file (a FIFO, device or socket is never read)");
  }
  EXPECT_EQ(ReadPng("/dev/zero").status().code(), StatusCode::kInvalidArgument);
}

// An 80-byte PNG declaring 16384x16384 pixels: refused before the 805 MB
// the pixels would take are allocated.
TEST(PngTest, PixelsTheFileCannotHoldAreRefusedBeforeAllocating) {
  const std::string dir = tpumesh::testing::TestTempDir();
  auto png = EncodePng(Noise(32, 32, 7), {});
  ASSERT_TRUE(png.ok());
  std::string big = *png;
  for (int i = 0; i < 4; ++i) big[16 + i] = big[20 + i] = static_cast<char>((16384u >> (24 - 8 * i)) & 0xff);
  const uint32_t crc = Crc32(big, 12, 29);
  for (int i = 0; i < 4; ++i) big[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  Spit(dir + "/bomb.png", big);
  for (PngRead mode : {PngRead::kRgbOnly, PngRead::kGrey}) {
    auto s = ReadPngAs(dir + "/bomb.png", mode);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("declares 16384x16384 pixels but holds only"));
  }
}

TEST(PngTest, WriteErrorsNameThePathAndLeaveNoFile) {
  const std::string dir = tpumesh::testing::TestTempDir();
  const Image img = Noise(3, 3, 0);

  const std::string missing = dir + "/no-such-dir/x.png";
  Status s = WritePngAtomic(missing, img, {});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "cannot write " + missing + ": No such file or directory");

  // A directory where the file should go: the rename fails, the temporary
  // is removed, the directory is untouched.
  std::filesystem::create_directories(dir + "/taken.png");
  s = WritePngAtomic(dir + "/taken.png", img, {});
  EXPECT_EQ(s.message(), "cannot write " + dir + "/taken.png: Is a directory");
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/taken.png"));

  // A regular file where a directory should be.
  Spit(dir + "/file", "x");
  s = WritePngAtomic(dir + "/file/x.png", img, {});
  EXPECT_EQ(s.message(), "cannot write " + dir + "/file/x.png: Not a directory");

  // An image that cannot be encoded: nothing is written at all.
  Image bad = img;
  bad.rgb.pop_back();
  EXPECT_EQ(WritePngAtomic(dir + "/bad.png", bad, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WritePngAtomic(dir + "/bad.png", img, {{"", "v"}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WritePngAtomic("", img, {}).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(Files(dir), (std::set<std::string>{"file", "taken.png"}));
}

TEST(PngTest, UnwritableDirectoryLeavesNoFile) {
  if (geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions are not enforced";
  const std::string dir = tpumesh::testing::TestTempDir() + "/ro";
  std::filesystem::create_directories(dir);
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  const Status s = WritePngAtomic(dir + "/x.png", Noise(3, 3, 0), {});
  chmod(dir.c_str(), 0755);
  EXPECT_EQ(s.message(), "cannot write " + dir + "/x.png: Permission denied");
  EXPECT_TRUE(Files(dir).empty());
}

// ---- Grid ----------------------------------------------------------------------

TEST(PngTest, GridPlacesImageIAtRowIOverColsColumnIModCols) {
  const int h = 3, w = 5;
  std::vector<Image> images;
  for (int i = 0; i < 8; ++i) images.push_back(Noise(h, w, 10 + i));
  auto grid = MakeImageGrid(images, 2, 4);
  ASSERT_TRUE(grid.ok()) << grid.status().message();
  EXPECT_EQ(grid->height, 2 * h);
  EXPECT_EQ(grid->width, 4 * w);
  ASSERT_EQ(grid->rgb.size(), static_cast<size_t>(2 * h * 4 * w * 3));
  for (int gy = 0; gy < 2 * h; ++gy)
    for (int gx = 0; gx < 4 * w; ++gx) {
      // diffusers: grid.paste(img, box=(i % cols * w, i // cols * h)).
      const int i = (gy / h) * 4 + gx / w, y = gy % h, x = gx % w;
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(grid->rgb[(gy * 4 * w + gx) * 3 + c], images[i].rgb[(y * w + x) * 3 + c])
            << "grid (" << gy << ", " << gx << ") should be image " << i << " (" << y << ", " << x << ")";
    }
  // Spot checks: image 5 is row 1, column 1; image 3 is row 0, column 3.
  EXPECT_EQ(grid->rgb[((1 * h + 0) * 4 * w + 1 * w + 0) * 3], images[5].rgb[0]);
  EXPECT_EQ(grid->rgb[((0 * h + 2) * 4 * w + 3 * w + 4) * 3 + 2], images[3].rgb[(2 * w + 4) * 3 + 2]);

  auto column = MakeImageGrid({images[0], images[1], images[2]}, 3, 1);
  ASSERT_TRUE(column.ok());
  EXPECT_EQ(column->height, 3 * h);
  EXPECT_EQ(column->width, w);
  std::vector<uint8_t> stacked;
  for (int i = 0; i < 3; ++i) stacked.insert(stacked.end(), images[i].rgb.begin(), images[i].rgb.end());
  EXPECT_EQ(column->rgb, stacked);
}

TEST(PngTest, GridShapes) {
  const std::vector<std::pair<int, std::pair<int, int>>> cases = {
      {1, {1, 1}}, {2, {1, 2}}, {3, {1, 3}}, {4, {2, 2}},  {6, {2, 3}},  {8, {2, 4}},
      {9, {3, 3}}, {7, {1, 7}}, {12, {3, 4}}, {16, {4, 4}}, {0, {0, 0}}, {-2, {0, 0}}};
  for (const auto& [n, want] : cases) EXPECT_EQ(GridShape(n), want) << n;
}

TEST(PngTest, GridErrors) {
  const std::vector<Image> mixed = {Noise(2, 2, 0), Noise(3, 2, 0)};
  auto s = MakeImageGrid(mixed, 1, 2);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "image grid: image 1 is 3x2, image 0 is 2x2 (all must be the same size)");
  const std::vector<Image> two = {Noise(2, 2, 0), Noise(2, 2, 1)};
  EXPECT_EQ(MakeImageGrid(two, 2, 2).status().message(), "image grid of 2x2 needs 4 images, got 2");
  EXPECT_EQ(MakeImageGrid(two, 0, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeImageGrid(two, 2, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeImageGrid({}, 0, 0).status().code(), StatusCode::kInvalidArgument);
  std::vector<Image> short_rgb = two;
  short_rgb[1].rgb.pop_back();
  EXPECT_THAT(MakeImageGrid(short_rgb, 1, 2).status().message(), HasSubstr("image 1 of 2x2 has 11 bytes"));
}

}  // namespace
}  // namespace tpumesh::pipeline
