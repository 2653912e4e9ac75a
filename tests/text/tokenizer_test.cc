// The CLIP tokenizer against transformers' ids: the tiny-sd-a golden
// (tests/data/tiny_tokenizer_golden.json, vocabulary embedded in the binary),
// edge cases under three special-token layouts
// (tests/data/tokenizer_edge_golden.json, scripts/refdata/), and the real
// ViT-L/14 vocabulary with its tokens.h5 read from
// ../shared/refdata/clip-tokenizer (skipped, saying so, when absent). Then
// the pieces: bytes_to_unicode, clean-up, padding, and load errors.
#include "text/tokenizer.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/golden.h"
#include "io/h5io.h"
#include "nlohmann/json.hpp"
#include "text/embedded.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
using Ids = std::vector<int32_t>;

nlohmann::json LoadGolden(const std::string& name) {
  std::ifstream in(std::string(TPUMESH_TEST_DATA_DIR) + "/" + name);
  EXPECT_TRUE(in) << name;
  return nlohmann::json::parse(in);
}

ClipTokenizer Tiny() {
  auto t = ClipTokenizer::FromStrings(
      ClipTokenizerTexts{embedded::TinyTokenizer_vocab_json(), embedded::TinyTokenizer_merges_txt(),
                         embedded::TinyTokenizer_special_tokens_map_json(),
                         embedded::TinyTokenizer_tokenizer_config_json()},
      "tiny");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

// Prompt i's untruncated and padded ids; returns the number that match both.
int CheckPrompts(const ClipTokenizer& tok, const std::vector<std::string>& prompts,
                 const std::vector<Ids>& untruncated, const std::vector<Ids>& padded, int max_length) {
  int matched = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string& p = prompts[i];
    auto got = tok.Encode(p);
    auto got_padded = tok.EncodePadded(p, max_length);
    if (!got.ok() || !got_padded.ok()) {
      ADD_FAILURE() << "prompt " << i << " '" << p << "': " << got.status().ToString() << " / "
                    << got_padded.status().ToString();
      continue;
    }
    EXPECT_EQ(*got, untruncated[i]) << "prompt " << i << " (untruncated): '" << p << "'";
    EXPECT_EQ(*got_padded, padded[i]) << "prompt " << i << " (max_length " << max_length << "): '" << p << "'";
    matched += *got == untruncated[i] && *got_padded == padded[i];
  }
  return matched;
}

TEST(TokenizerTest, TinyVocabularyMatchesTransformers) {
  // An ordinary prompt, "", a 120-token prompt (truncated) and one with case,
  // an apostrophe, a digit, punctuation, a triple space and "café".
  const nlohmann::json g = LoadGolden("tiny_tokenizer_golden.json");
  const auto prompts = g["prompts"].get<std::vector<std::string>>();
  ASSERT_EQ(prompts.size(), 4u);
  const auto untruncated = g["untruncated"].get<std::vector<Ids>>();
  const auto padded = g["input_ids"].get<std::vector<Ids>>();
  ASSERT_GT(untruncated[2].size(), 77u);  // the truncation case is really there
  EXPECT_EQ(CheckPrompts(Tiny(), prompts, untruncated, padded, 77), 4);

  // The same files as a folder (tokenizer_config.json and
  // special_tokens_map.json read from disk).
  auto folder = ClipTokenizer::FromFolder(std::string(TPUMESH_SOURCE_DIR) + "/text/data/tiny-tokenizer");
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  EXPECT_EQ(CheckPrompts(*folder, prompts, untruncated, padded, 77), 4);
}

TEST(TokenizerTest, EdgeCasesMatchTransformers) {
  const nlohmann::json g = LoadGolden("tokenizer_edge_golden.json");
  const auto prompts = g["prompts"].get<std::vector<std::string>>();
  for (const auto& [name, v] : g["variants"].items()) {
    SCOPED_TRACE("variant " + name);
    const nlohmann::json& files = v["files"];
    const std::string special = files.value("special_tokens_map.json", "");
    const std::string config = files.value("tokenizer_config.json", "");
    const bool own_configs = files.empty();  // the folder's own configs
    auto tok = ClipTokenizer::FromStrings(
        ClipTokenizerTexts{embedded::TinyTokenizer_vocab_json(), embedded::TinyTokenizer_merges_txt(),
                           own_configs ? embedded::TinyTokenizer_special_tokens_map_json() : special,
                           own_configs ? embedded::TinyTokenizer_tokenizer_config_json() : config},
        name);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    for (int max_length : g["max_lengths"].get<std::vector<int>>()) {
      const int matched = CheckPrompts(*tok, prompts, v["untruncated"].get<std::vector<Ids>>(),
                                       v["padded"][std::to_string(max_length)].get<std::vector<Ids>>(), max_length);
      EXPECT_EQ(matched, static_cast<int>(prompts.size()));
    }
  }
}

TEST(TokenizerTest, RealClipVocabularyMatchesTransformers) {
  const std::string dir = std::string(TPUMESH_SOURCE_DIR) + "/../shared/refdata/clip-tokenizer";
  const std::string h5 = dir + "/tokens.h5";
  // They come from ../shared, never from the repository.
  TPUMESH_REQUIRE_REFDATA(dir + "/vocab.json");
  TPUMESH_REQUIRE_REFDATA(h5);
  auto tok = ClipTokenizer::FromFolder(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->vocab_size(), 49408u);
  EXPECT_EQ(tok->bos_id(), 49406);
  EXPECT_EQ(tok->eos_id(), 49407);
  EXPECT_EQ(tok->pad_id(), 49407);
  EXPECT_EQ(*tok->Encode("a photo of a cat"), (Ids{49406, 320, 1125, 539, 320, 2368, 49407}));

  auto prompts = H5ReadStrings(h5, "prompts");
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  auto input_ids = H5ReadArray(h5, "input_ids");
  ASSERT_TRUE(input_ids.ok()) << input_ids.status().ToString();
  const size_t n = prompts->size();
  ASSERT_EQ(input_ids->shape(), (mesh::Shape{static_cast<int64_t>(n), 77}));
  const std::vector<int32_t> flat = input_ids->ToVector<int32_t>();
  std::vector<Ids> untruncated, padded;
  for (size_t i = 0; i < n; ++i) {
    auto u = H5ReadArray(h5, "ids_untruncated_" + std::to_string(i));
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    untruncated.push_back(u->ToVector<int32_t>());
    padded.emplace_back(flat.begin() + i * 77, flat.begin() + (i + 1) * 77);
  }
  const int matched = CheckPrompts(*tok, *prompts, untruncated, padded, 77);
  EXPECT_EQ(matched, static_cast<int>(n));
  std::cout << "[ tokens.h5 ] " << matched << " of " << n << " prompts equal transformers' ids\n";

  auto batch = tok->EncodeBatch(*prompts, 77);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(*batch, flat);
}

TEST(TokenizerTest, BytesToUnicodeRoundTrip) {
  int identity = 0;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = ClipTokenizer::ByteToUnicode(static_cast<uint8_t>(b));
    EXPECT_EQ(ClipTokenizer::UnicodeToByte(c), b) << "byte " << b;
    identity += c == static_cast<char32_t>(b);
    EXPECT_TRUE(c == static_cast<char32_t>(b) || (c >= 256 && c < 256 + 68)) << "byte " << b;
  }
  EXPECT_EQ(identity, 188);  // '!'..'~', '¡'..'¬', '®'..'ÿ'
  EXPECT_EQ(ClipTokenizer::ByteToUnicode(' '), U'\u0120');   // 'Ġ'
  EXPECT_EQ(ClipTokenizer::ByteToUnicode('\n'), U'\u010A');  // 'Ċ'
  EXPECT_EQ(ClipTokenizer::ByteToUnicode(0), U'\u0100');
  EXPECT_EQ(ClipTokenizer::ByteToUnicode(0xAD), U'\u0143');  // the last one
  EXPECT_EQ(ClipTokenizer::UnicodeToByte(U'\u0144'), -1);
  EXPECT_EQ(ClipTokenizer::UnicodeToByte(U' '), -1);
}

TEST(TokenizerTest, CleanText) {
  auto clean = [](std::string_view s) {
    auto r = ClipTokenizer::CleanText(s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::string("<error>");
  };
  // Whitespace of every kind folds to one space, none at the ends.
  EXPECT_EQ(clean("  A\tCAT\n\nsat \r "), "a cat sat");
  EXPECT_EQ(clean("a\xc2\xa0" "b\xe3\x80\x80" "c\xe2\x80\xa8" "d"), "a b c d");  // NBSP, U+3000, U+2028
  EXPECT_EQ(clean("   "), "");
  // Control and format characters, NUL, U+FFFD, private use are dropped.
  EXPECT_EQ(clean(std::string("a\x00" "b\x07" "c\xe2\x80\x8b" "d\xef\xbf\xbd" "e\xee\x80\x80" "f", 17)), "abcdef");
  // A code point new in Unicode 15 (U+1F6DC) is unassigned for Python 3.11.
  EXPECT_EQ(clean("x\xf0\x9f\x9b\x9cy"), "xy");
  EXPECT_EQ(clean("ÉCOLE"), "école");
  EXPECT_EQ(clean("cafe\xcc\x81"), "caf\xc3\xa9");  // NFC: e + combining acute -> é
  EXPECT_EQ(clean("\xe7\x8c\xab\xe5\x92\xaa"), "\xe7\x8c\xab \xe5\x92\xaa");  // CJK ideographs spaced
  EXPECT_EQ(clean("ΟΔΟΣ ΑΣ"), "οδος ας");       // final sigma per word
  EXPECT_EQ(clean("İ"), "i\xcc\x87");          // full lower-case mapping
  auto bad = ClipTokenizer::CleanText("ok \xc3");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, TokenizeSplitsAndMerges) {
  ClipTokenizer t = Tiny();
  // "'s" is one piece; the tiny vocabulary has no merge for it.
  EXPECT_EQ(*t.Tokenize("A CAT's"), (std::vector<std::string>{"a</w>", "cat</w>", "'", "s</w>"}));
  // Added tokens are cut out of the raw text; the pattern's literals map to
  // themselves after lower-casing.
  EXPECT_EQ(*t.Tokenize("x<|endoftext|>y"), (std::vector<std::string>{"x</w>", "<|endoftext|>", "y</w>"}));
  EXPECT_EQ(*t.Encode("<|ENDOFTEXT|>"), (Ids{998, 999, 999}));
}

TEST(TokenizerTest, EmptyPromptPaddingAndBatch) {
  ClipTokenizer t = Tiny();
  EXPECT_EQ(*t.Encode(""), (Ids{998, 999}));
  auto ids = t.EncodePadded("", 77);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 77u);
  EXPECT_EQ((*ids)[0], t.bos_id());
  EXPECT_EQ((*ids)[1], t.eos_id());
  for (int i = 2; i < 77; ++i) EXPECT_EQ((*ids)[i], t.pad_id()) << "position " << i;

  // Truncation keeps bos, the first max_length - 2 tokens and eos.
  auto full = t.Encode("a b c d e f");
  auto cut = t.EncodePadded("a b c d e f", 5);
  ASSERT_TRUE(full.ok() && cut.ok());
  EXPECT_EQ(*cut, (Ids{998, (*full)[1], (*full)[2], (*full)[3], 999}));
  EXPECT_EQ(t.EncodePadded("a", 1).status().code(), StatusCode::kInvalidArgument);

  auto batch = t.EncodeBatch({"a cat", "", "a b c d e f"}, 5);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 15u);
  EXPECT_EQ(Ids(batch->begin() + 10, batch->end()), *cut);
  auto bad = t.EncodeBatch({"ok", "x\xff"}, 5);
  EXPECT_THAT(bad.status().message(), HasSubstr("prompt 1: prompt is not valid UTF-8 (byte offset 1)"));
}

// A temporary tokenizer folder.
class TokenizerFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tpumesh_tokenizer_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    Write("vocab.json", std::string(embedded::TinyTokenizer_vocab_json()));
    Write("merges.txt", std::string(embedded::TinyTokenizer_merges_txt()));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  Status Load() { return ClipTokenizer::FromFolder(dir_.string()).status(); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(TokenizerFilesTest, FromFilesAndFolderAgree) {
  auto a = ClipTokenizer::FromFiles(Path("vocab.json"), Path("merges.txt"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = ClipTokenizer::FromFolder(dir_.string());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*a->Encode("a photograph of an astronaut"), *b->Encode("a photograph of an astronaut"));
  EXPECT_EQ(a->pad_id(), a->eos_id());  // the default pad is <|endoftext|>
}

TEST_F(TokenizerFilesTest, MissingFiles) {
  std::filesystem::remove(dir_ / "merges.txt");
  Status s = Load();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(Path("merges.txt") + ": no such file"));
  EXPECT_EQ(ClipTokenizer::FromFolder("/nonexistent").status().code(), StatusCode::kNotFound);
}

TEST_F(TokenizerFilesTest, CorruptVocab) {
  Write("vocab.json", "{\"a\": 1,");
  EXPECT_THAT(Load().message(), HasSubstr(Path("vocab.json") + ": not valid JSON"));
  Write("vocab.json", "[1, 2]");
  EXPECT_THAT(Load().message(), HasSubstr(Path("vocab.json") + ": not a JSON object"));
  Write("vocab.json", R"({"<|startoftext|>": 0, "<|endoftext|>": "one"})");
  EXPECT_THAT(Load().message(), HasSubstr("the id of '<|endoftext|>' is not an integer"));
  Write("vocab.json", R"({"<|startoftext|>": 0, "a": 1})");
  const Status s = Load();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("eos_token '<|endoftext|>' is not in " + Path("vocab.json")));
}

TEST_F(TokenizerFilesTest, CorruptMerges) {
  Write("merges.txt", "#version: 0.2\ni n\nt h e\n");
  EXPECT_THAT(Load().message(), HasSubstr(Path("merges.txt") + ": line 3 has 3 fields, want two symbols"));
  Write("merges.txt", "#version: 0.2\n");
  EXPECT_THAT(Load().message(), HasSubstr(Path("merges.txt") + ": no merges"));
  Write("merges.txt", "#version: 0.2\ni \xff\n");
  EXPECT_THAT(Load().message(), HasSubstr(Path("merges.txt") + ": not valid UTF-8 (byte offset 16)"));
  // CRLF line ends and trailing blank lines are fine, as in Python.
  Write("merges.txt", "#version: 0.2\r\ni n\r\nt h\r\n\r\n");
  EXPECT_TRUE(Load().ok()) << Load().ToString();
}

TEST_F(TokenizerFilesTest, CorruptConfigs) {
  Write("special_tokens_map.json", R"({"pad_token": "no-such-token"})");
  EXPECT_THAT(Load().message(),
              HasSubstr(Path("special_tokens_map.json") + ": pad_token 'no-such-token' is not in"));
  Write("special_tokens_map.json", R"({"pad_token": "!"})");
  auto t = ClipTokenizer::FromFolder(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->pad_id(), 0);  // SD 2.x style
  Write("tokenizer_config.json", R"({"padding_side": "middle"})");
  EXPECT_THAT(Load().message(), HasSubstr(Path("tokenizer_config.json") + ": padding_side is not"));
  Write("tokenizer_config.json", R"({"eos_token": 7})");
  EXPECT_THAT(Load().message(), HasSubstr(Path("tokenizer_config.json") + ": eos_token is neither a string"));
  Write("tokenizer_config.json", R"({"pad_token": null})");
  t = ClipTokenizer::FromFolder(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();  // special_tokens_map.json's "!" overrides (legacy layout)
  EXPECT_EQ(t->pad_id(), 0);
  Write("tokenizer_config.json", R"({"pad_token": null, "added_tokens_decoder": {}})");
  t = ClipTokenizer::FromFolder(dir_.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();  // now special_tokens_map.json is not read
  EXPECT_EQ(t->EncodePadded("a").status().code(), StatusCode::kFailedPrecondition);
}

TEST(TokenizerTest, InvalidUtf8Prompt) {
  ClipTokenizer t = Tiny();
  for (const char* bad : {"ok \xff\xfe", "ok \xc3(", "ok \xed\xa0\x80", "ok \xc0\xaf"}) {
    auto r = t.Encode(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("not valid UTF-8 (byte offset 3)"));
  }
}

}  // namespace
}  // namespace tpumesh::pipeline
