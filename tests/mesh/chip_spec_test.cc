#include "mesh/chip_spec.h"

#include <cmath>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpumesh::mesh {
namespace {

using ::testing::HasSubstr;

TEST(ChipSpecTest, PresetsAreConsistent) {
  for (const std::string& name : ChipPresetNames()) {
    auto c = LoadChipSpec(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_TRUE(c->Validate().ok()) << name;
    EXPECT_EQ(c->name, name);
    // The MXU arithmetic explains the published peak to within 1%.
    EXPECT_NEAR(c->mxu_peak_flops() / c->peak_bf16_flops, 1.0, 0.01) << name;
  }
  EXPECT_EQ(V5eChip().mxus_per_chip(), 4);
  EXPECT_EQ(V4Chip().mxus_per_chip(), 8);
  // v2: a device is one of the chip's two cores.
  const ChipSpec v2 = V2Chip();
  EXPECT_EQ(v2.hbm_bytes_per_device(), v2.hbm_bytes / 2);
  EXPECT_DOUBLE_EQ(v2.peak_bf16_flops_per_device(), 23e12);
}

TEST(ChipSpecTest, JsonRoundTrip) {
  const ChipSpec c = V4Chip();
  auto back = ChipSpecFromJson(c.ToJson(), "v4.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  EXPECT_EQ(back->default_topology, (std::vector<int>{2, 2, 1}));
}

TEST(ChipSpecTest, BadJsonNamesTheField) {
  const nlohmann::json good = nlohmann::json::parse(V5eChip().ToJson());
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& j) { j["mxu_size"] = 128; }, "unknown field 'mxu_size'"},
      {[](nlohmann::json& j) { j.erase("clock_hz"); }, "missing field 'clock_hz'"},
      {[](nlohmann::json& j) { j["clock_hz"] = "fast"; }, "field 'clock_hz' must be a number"},
      {[](nlohmann::json& j) { j["ici_ports"] = 2.5; }, "field 'ici_ports' must be an integer"},
      {[](nlohmann::json& j) { j["hbm_bandwidth"] = -1; }, "field 'hbm_bandwidth' must be > 0"},
      {[](nlohmann::json& j) { j["devices_per_chip"] = 3; }, "'devices_per_chip' must be >= 1 and divide"},
      {[](nlohmann::json& j) { j["default_topology"] = {2, 2, 2, 2}; }, "'default_topology' must have 1 to 3 axes"},
      {[](nlohmann::json& j) { j["name"] = 7; }, "field 'name' must be a string"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    auto r = ChipSpecFromJson(j.dump(), "chip.json");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << j.dump();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
    EXPECT_THAT(r.status().message(), HasSubstr("chip.json"));
  }
  EXPECT_THAT(ChipSpecFromJson("{", "x.json").status().message(), HasSubstr("x.json: not valid JSON"));
  EXPECT_THAT(ChipSpecFromJson("[1]", "x.json").status().message(), HasSubstr("must hold a JSON object"));
}

TEST(ChipSpecTest, FilesAndPresets) {
  auto missing = LoadChipSpec("/nonexistent/chip.json");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/chip.json"));
  auto custom = LoadChipSpec(std::string(TPUMESH_SOURCE_DIR) + "/docs/examples/custom_chip.json");
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  EXPECT_EQ(custom->name, "v5e-half-clock");
  EXPECT_NEAR(custom->mxu_peak_flops() / custom->peak_bf16_flops, 1.0, 0.01);
}

}  // namespace
}  // namespace tpumesh::mesh
