// io/workload.h: SCALE-Sim topology CSVs (conv and GEMM forms) and JSON op
// lists become op records with the right matmuls for the MXU; malformed
// files are one error naming the file and the place.
#include "io/workload.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpumesh::pipeline {
namespace {

using ::testing::HasSubstr;
constexpr kernels::Precision kDefault = kernels::Precision::kDefault;

TEST(WorkloadTest, ScaleSimConvRowsAreUnpaddedImagesAsMatmuls) {
  // SCALE-Sim's own form: spaces after commas, a trailing comma, CRLF.
  const std::string csv =
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\r\n"
      "Conv1, 227, 227, 11, 11, 3, 96, 4,\r\n"
      "\r\n"
      "Conv2, 31, 31, 5, 5, 96, 256, 1,\r\n";
  auto layers = ParseWorkload(csv, "alexnet.csv", kDefault);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 2u);
  const mesh::OpRecord& c1 = (*layers)[0].record;
  EXPECT_EQ(c1.module, "Conv1");
  EXPECT_EQ(c1.type, "conv");
  // (227 - 11) / 4 + 1 = 55: 55 x 55 ofmap pixels, 96 filters, K = 11 x 11 x 3.
  ASSERT_EQ(c1.mxu.size(), 1u);
  EXPECT_EQ(c1.mxu[0].m, 55 * 55);
  EXPECT_EQ(c1.mxu[0].n, 96);
  EXPECT_EQ(c1.mxu[0].k, 363);
  EXPECT_DOUBLE_EQ(c1.cost.flops, 2.0 * 55 * 55 * 96 * 363);
  const mesh::OpRecord& c2 = (*layers)[1].record;
  EXPECT_EQ(c2.mxu[0].m, 27 * 27);
  EXPECT_EQ(c2.mxu[0].n, 256);
  EXPECT_EQ(c2.mxu[0].k, 5 * 5 * 96);
  EXPECT_FALSE((*layers)[0].collective.has_value());
}

// As SCALE-Sim reads them: the output size rounds up (224 - 11 over stride
// 4: 55 pixels a side, the last window overhanging), and a "DP" layer is one
// single-channel conv per channel.
TEST(WorkloadTest, ScaleSimRoundsOutputsUpAndSplitsDepthwiseLayers) {
  const std::string header =
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n";
  auto up = ParseWorkload(header + "Conv1, 224, 224, 11, 11, 3, 96, 4,\n", "a.csv", kDefault);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ((*up)[0].record.mxu[0].m, 55 * 55);
  EXPECT_EQ((*up)[0].record.shape, "x[1,3,224,224] w[96,3,11,11] stride 4 pad bottom 3 right 3");
  auto dw = ParseWorkload(header + "Conv_DP_1, 14, 14, 3, 3, 4, 1, 1,\n", "m.csv", kDefault);
  ASSERT_TRUE(dw.ok()) << dw.status().ToString();
  ASSERT_EQ(dw->size(), 4u);
  EXPECT_EQ((*dw)[3].record.module, "Conv_DP_1Channel_3");
  EXPECT_EQ((*dw)[3].record.mxu[0].k, 9);
  EXPECT_EQ((*dw)[3].record.mxu[0].m, 12 * 12);
}

TEST(WorkloadTest, ScaleSimGemmRowsAreMatmuls) {
  auto layers = ParseWorkload("Layer, M, N, K,\nfc1, 4096, 320, 768,\n", "gemm.CSV", kDefault);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 1u);
  const mesh::OpRecord& r = (*layers)[0].record;
  EXPECT_EQ(r.type, "matmul");
  EXPECT_EQ(r.mxu[0].m, 4096);
  EXPECT_EQ(r.mxu[0].n, 320);
  EXPECT_EQ(r.mxu[0].k, 768);
  // bf16 operands and result in HBM at default: (M K + K N + M N) x 2 bytes.
  EXPECT_DOUBLE_EQ(r.cost.bytes(), 2.0 * (4096.0 * 768 + 768.0 * 320 + 4096.0 * 320));
  auto f32 = ParseWorkload("Layer, M, N, K,\nfc1, 4096, 320, 768,\n", "gemm.csv", kernels::Precision::kHighest);
  ASSERT_TRUE(f32.ok());
  EXPECT_DOUBLE_EQ((*f32)[0].record.cost.bytes(), 2 * r.cost.bytes());
}

TEST(WorkloadTest, JsonOpsBecomeRecords) {
  const std::string text = R"({"layers": [
    {"name": "proj", "op": "matmul", "m": 8, "n": 4, "k": 2, "repeat": 3},
    {"name": "c", "op": "conv", "batch": 2, "height": 8, "width": 8, "in_channels": 4,
     "out_channels": 6, "kernel": 3, "padding": 1, "stride": 2},
    {"name": "attn", "op": "attention", "batch": 2, "q_len": 16, "kv_len": 8, "heads": 2, "head_dim": 4},
    {"name": "gelu", "op": "elementwise", "elements": 100, "flops_per_element": 8,
     "transcendentals_per_element": 1, "inputs": 2},
    {"name": "sum", "op": "psum", "axis": "model", "bytes": 4096}
  ]})";
  auto layers = ParseWorkload(text, "ops.json", kernels::Precision::kHighest);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 5u);
  const auto& l = *layers;
  EXPECT_EQ(l[0].record.repeat, 3);
  EXPECT_EQ(l[0].record.mxu[0].m, 8);
  // conv: 4 x 4 output pixels per image (stride 2, padding 1), 2 images.
  EXPECT_EQ(l[1].record.mxu[0].m, 2 * 4 * 4);
  EXPECT_EQ(l[1].record.mxu[0].n, 6);
  EXPECT_EQ(l[1].record.mxu[0].k, 3 * 3 * 4);
  // attention: Q K^T and P V per (batch, head).
  ASSERT_EQ(l[2].record.mxu.size(), 2u);
  EXPECT_EQ(l[2].record.mxu[0].m, 16);
  EXPECT_EQ(l[2].record.mxu[0].n, 8);
  EXPECT_EQ(l[2].record.mxu[0].k, 4);
  EXPECT_EQ(l[2].record.mxu[0].count, 4);
  EXPECT_DOUBLE_EQ(l[3].record.cost.flops, 800);
  EXPECT_DOUBLE_EQ(l[3].record.cost.transcendentals, 100);
  EXPECT_DOUBLE_EQ(l[3].record.cost.bytes(), 4.0 * 300);
  ASSERT_TRUE(l[4].collective.has_value());
  EXPECT_EQ(*l[4].collective, mesh::CollectiveKind::kPsum);
  EXPECT_EQ(l[4].axis, "model");
  EXPECT_EQ(l[4].bytes, 4096);
  EXPECT_EQ(l[4].record.type, "collective");
}

TEST(WorkloadTest, MalformedFilesNameTheFileAndThePlace) {
  const std::string conv_header =
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n";
  struct Case {
    std::string origin, text, message;
  };
  for (const Case& c : std::vector<Case>{
           {"a.csv", "", "a.csv: empty (no SCALE-Sim topology header)"},
           {"a.csv", "Layer, M, N,\nx, 1, 2,\n", "a.csv:1: not a SCALE-Sim topology header"},
           {"a.csv", "Layer, M, N, K,\n", "a.csv: a header and no layers"},
           {"a.csv", "Layer, M, N, K,\nfc, 4, 4,\n", "a.csv:2: 3 fields, the header has 4 (GEMM form)"},
           {"a.csv", "Layer, M, N, K,\nfc, 4, x4, 4,\n", "a.csv:2:3: n is 'x4', not an integer from 1 to 16777216"},
           {"a.csv", "Layer, M, N, K,\nfc, 4, 4, 0,\n", "a.csv:2:4: k is '0'"},
           {"a.csv", "Layer, M, N, K,\nfc, 4, 4, -2,\n", "a.csv:2:4: k is '-2'"},
           {"a.csv", "Layer, M, N, K,\n, 4, 4, 4,\n", "a.csv:2:1: the layer has no name"},
           {"a.csv", conv_header + "c, 8, 8, 9, 3, 3, 4, 1,\n", "a.csv:2: a 9x3 filter does not fit a 8x8 IFMAP"},
           {"a.txt", "Layer, M, N, K,\n", "a.txt: a workload is a SCALE-Sim topology (.csv) or a JSON list"},
           {"o.json", "{\"layers\": [\n  {\"name\": \"a\",}\n]}", "o.json:2:"},
           {"o.json", "{\"layers\": [{\"name\": \"fc\xff\", \"op\": \"matmul\"}]}",
            "o.json:1:25: not valid JSON (invalid string: ill-formed UTF-8 byte; last read: '\"fc"},
           {"o.json", R"({"layers": [{"name": "fc", "op": "matmul", "m": 1e999}]})",
            "o.json: not valid JSON (number overflow parsing '1e999')"},
           {"o.json", "[]", "o.json: a JSON workload is an object with a \"layers\" array"},
           {"o.json", R"({"layers": []})", "o.json: \"layers\" is empty"},
           {"o.json", R"({"layers": [], "x": 1})", "o.json: unknown field 'x'"},
           {"o.json", R"({"layers": [{"op": "matmul"}]})", "o.json: layers[0]: missing field 'name'"},
           {"o.json", R"({"layers": [{"name": "fc", "op": "gemm"}]})",
            "o.json: layers[0] ('fc'): op 'gemm' is not one of matmul, conv"},
           {"o.json", R"({"layers": [{"name": "fc", "op": "matmul", "m": 2, "n": 2}]})",
            "layers[0] ('fc'): missing field 'k'"},
           {"o.json", R"({"layers": [{"name": "fc", "op": "matmul", "m": 2, "n": 2, "k": 1.5}]})",
            "layers[0] ('fc'): field 'k' is 1.5, not an integer from 1 to"},
           {"o.json", R"({"layers": [{"name": "fc", "op": "matmul", "m": 2, "n": 2, "k": 2, "kk": 1}]})",
            "layers[0] ('fc'): unknown field 'kk' for op 'matmul'"},
           {"o.json", R"({"layers": [{"name": "s", "op": "psum", "bytes": 8}]})",
            "layers[0] ('s'): missing field 'axis'"},
           {"o.json", R"({"layers": [{"name": "c", "op": "conv", "batch": 1, "height": 2, "width": 2,
               "in_channels": 1, "out_channels": 1, "kernel": 5}]})",
            "layers[0] ('c'): "},
           // Round two (issue 28): bounded work and exact figures.
           {"o.json", R"({"layers": [{"name": "c", "op": "conv", "batch": 16777216, "height": 16777216,
               "width": 16777216, "in_channels": 1, "out_channels": 1, "kernel": 1}]})",
            "layers[0] ('c'): batch x output pixels = 16777216 x 16777216 x 16777216, more than 2^40"},
           {"o.json", R"({"layers": [{"name": "a", "op": "matmul", "m": [[[[1]]]], "n": 1, "k": 1}]})",
            "layers[0] ('a'): field 'm' is an array, not an integer"},
           {"o.json", "{\"layers\": [{\"name\": \"fc\\nx\", \"op\": \"gemm\"}]}",
            "layers[0] ('fc\\nx'): op 'gemm'"},
           {"o.json", R"({"layers": [{"name": "a", "name": "b", "op": "matmul", "m": 1, "n": 1, "k": 1}]})",
            "o.json: an object holds the key 'name' twice"},
           {"dw.csv", conv_header + "c_DP, 8, 8, 3, 3, 1000000, 1, 1,\n",
            "dw.csv:2: the depthwise layer's 1000000 channels make more than 100000 layers, the most a workload may "
            "price (simulate --max-layers N raises it"},
       }) {
    auto r = ParseWorkload(c.text, c.origin, kDefault);
    ASSERT_FALSE(r.ok()) << c.origin << ": " << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_EQ(std::string(r.status().message()).find('\n'), std::string::npos) << "one line: " << c.text;
  }
}

// A field nested 200,000 arrays deep (400 KB): one line naming the field, no
// stack overflow (the message once dumped the value, recursing per level).
TEST(WorkloadTest, DeeplyNestedValuesAreNamedByTheirType) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto r = ParseWorkload(R"({"layers": [{"name": "a", "op": "matmul", "m": )" + deep + R"(, "n": 1, "k": 1}]})",
                         "deep.json", kDefault);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("deep.json: layers[0] ('a'): field 'm' is an array"));
}

// A UTF-8 byte order mark (spreadsheets write one) and CRLF line ends.
TEST(WorkloadTest, AByteOrderMarkAndCrlfAreAccepted) {
  for (const char* text : {"\xEF\xBB\xBFLayer, M, N, K,\nfc1, 64, 32, 16,\n", "Layer, M, N, K,\r\nfc1, 64, 32, 16,\r\n"}) {
    auto r = ParseWorkload(text, "g.csv", kDefault);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].record.module, "fc1");
  }
  auto j = ParseWorkload("\xEF\xBB\xBF{\"layers\": [{\"name\": \"a\", \"op\": \"matmul\", \"m\": 1, \"n\": 1, \"k\": 1}]}",
                         "g.json", kDefault);
  EXPECT_TRUE(j.ok()) << j.status().message();
}

// --max-layers: the bound on expanded layers, raised or lowered by the caller.
TEST(WorkloadTest, TheLayerBoundIsTheCallers) {
  const std::string two = "Layer, M, N, K,\na, 1, 1, 1,\nb, 1, 1, 1,\n";
  EXPECT_TRUE(ParseWorkload(two, "t.csv", kDefault, 2).ok());
  auto r = ParseWorkload(two, "t.csv", kDefault, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("t.csv:3: the file has more than 1 layers"));
}

}  // namespace
}  // namespace tpumesh::pipeline
