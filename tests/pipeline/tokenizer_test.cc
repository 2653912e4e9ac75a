// The CLIP tokenizer against transformers' ids: the tiny reference vocabulary
// (embedded in the binary) and the real ViT-L/14 vocabulary from
// ../shared/refdata/clip-tokenizer (skipped, saying so, when absent).
#include "pipeline/tokenizer.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pipeline/embedded.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;

nlohmann::json LoadGolden(const std::string& name) {
  std::ifstream in(std::string(TPUMESH_TEST_DATA_DIR) + "/" + name);
  EXPECT_TRUE(in) << name;
  return nlohmann::json::parse(in);
}

void CheckAll(const ClipTokenizer& tok, const nlohmann::json& golden) {
  const auto& prompts = golden["prompts"];
  ASSERT_GT(prompts.size(), 0u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string p = prompts[i].get<std::string>();
    auto untrunc = tok.Encode(p);
    ASSERT_TRUE(untrunc.ok()) << untrunc.status().ToString();
    EXPECT_EQ(*untrunc, golden["untruncated"][i].get<std::vector<int32_t>>()) << "prompt " << i << ": '" << p << "'";
    auto padded = tok.EncodePadded(p, 77);
    ASSERT_TRUE(padded.ok());
    EXPECT_EQ(*padded, golden["input_ids"][i].get<std::vector<int32_t>>()) << "prompt " << i << ": '" << p << "'";
  }
}

ClipTokenizer Tiny() {
  auto t = ClipTokenizer::FromStrings(embedded::TinyTokenizer_vocab_json(), embedded::TinyTokenizer_merges_txt(),
                                      embedded::TinyTokenizer_special_tokens_map_json(), "tiny");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

TEST(TokenizerTest, TinyVocabularyMatchesTransformers) {
  // An ordinary prompt, "", a 120-token prompt (truncated) and one with case,
  // an apostrophe, a digit, punctuation, a triple space and "café".
  CheckAll(Tiny(), LoadGolden("tiny_tokenizer_golden.json"));
}

TEST(TokenizerTest, RealClipVocabularyMatchesTransformers) {
  const std::string dir = std::string(TPUMESH_SOURCE_DIR) + "/../shared/refdata/clip-tokenizer";
  if (access((dir + "/vocab.json").c_str(), R_OK) != 0)
    GTEST_SKIP() << "the real CLIP vocabulary is not at " << dir << " (it comes from ../shared, not the repo)";
  auto tok = ClipTokenizer::FromFolder(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->bos_id(), 49406);
  EXPECT_EQ(tok->eos_id(), 49407);
  EXPECT_EQ(*tok->Encode("a photo of a cat"), (std::vector<int32_t>{49406, 320, 1125, 539, 320, 2368, 49407}));
  CheckAll(*tok, LoadGolden("clip_tokens_golden.json"));
}

TEST(TokenizerTest, CleanText) {
  EXPECT_EQ(*ClipTokenizer::CleanText("  A\tCAT\n\nsat  "), "a cat sat");
  EXPECT_EQ(*ClipTokenizer::CleanText("ÉCOLE"), "école");
  EXPECT_EQ(*ClipTokenizer::CleanText("cafe\xcc\x81"), "caf\xc3\xa9");  // NFC: e + combining acute -> é
  EXPECT_EQ(*ClipTokenizer::CleanText("a\x07z"), "az");                  // control character dropped
  EXPECT_EQ(*ClipTokenizer::CleanText("\xe7\x8c\xab\xe5\x92\xaa"), "\xe7\x8c\xab \xe5\x92\xaa");  // CJK spaced
}

TEST(TokenizerTest, EmptyPromptAndPadding) {
  ClipTokenizer t = Tiny();
  auto ids = t.EncodePadded("", 77);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], t.bos_id());
  EXPECT_EQ((*ids)[1], t.eos_id());
  for (int i = 2; i < 77; ++i) EXPECT_EQ((*ids)[i], t.pad_id());
}

TEST(TokenizerTest, Errors) {
  ClipTokenizer t = Tiny();
  auto bad = t.Encode("ok \xff\xfe");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("not valid UTF-8 (byte offset 3)"));
  const std::string merges = "#version: 0.2\na b\n";
  EXPECT_THAT(ClipTokenizer::FromStrings("[1]", merges, "", "m").status().message(), HasSubstr("vocab.json is not a JSON object"));
  EXPECT_THAT(ClipTokenizer::FromStrings(R"({"a": 1})", merges, "", "m").status().message(),
              HasSubstr("lacks <|startoftext|>"));
  EXPECT_THAT(ClipTokenizer::FromStrings(R"({"<|startoftext|>": 0, "<|endoftext|>": 1})", "#version\na b c\n", "", "m")
                  .status().message(),
              HasSubstr("merges.txt line 2 is not two space-separated symbols"));
  EXPECT_EQ(ClipTokenizer::FromFolder("/nonexistent").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpumesh::pipeline
