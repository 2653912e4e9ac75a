#include "mesh/chip_spec.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpumesh::mesh {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

std::vector<ChipSpec> AllPresets() {
  return {V5eChip(), V4Chip(), V2Chip(), V6eChip(), V5pChip(), Tpu7xChip()};
}

TEST(ChipSpecTest, PresetsValidate) {
  EXPECT_EQ(ChipPresetNames(), (std::vector<std::string>{"v5e", "v4", "v2", "v6e", "v5p", "tpu7x"}));
  EXPECT_EQ(ChipPresetList(), "v5e, v4, v2, v6e, v5p, tpu7x");
  for (const ChipSpec& c : AllPresets()) {
    Status s = c.Validate();
    EXPECT_TRUE(s.ok()) << c.name << ": " << s.ToString();
  }
}

TEST(ChipSpecTest, MxuArithmeticExplainsThePublishedPeak) {
  for (const ChipSpec& c : AllPresets()) {
    EXPECT_NEAR(c.mxu_peak_flops() / c.peak_bf16_flops, 1.0, 0.01) << c.name;
  }
  EXPECT_EQ(V5eChip().mxus_per_chip(), 4);
  EXPECT_EQ(V4Chip().mxus_per_chip(), 8);
  EXPECT_EQ(V2Chip().mxus_per_chip(), 2);
  EXPECT_EQ(V6eChip().mxus_per_chip(), 2);
  EXPECT_EQ(V5pChip().mxus_per_chip(), 8);
  EXPECT_EQ(Tpu7xChip().mxus_per_chip(), 4);
}

TEST(ChipSpecTest, PresetFigures) {
  const ChipSpec v5e = V5eChip();
  EXPECT_EQ(v5e.device_kind, "TPU v5 lite");
  EXPECT_DOUBLE_EQ(v5e.peak_bf16_flops, 197e12);
  EXPECT_EQ(v5e.hbm_bytes, 16 * kGiB);
  EXPECT_DOUBLE_EQ(v5e.hbm_bandwidth, 819e9);
  EXPECT_EQ(v5e.vmem_bytes, 128 * kMiB);
  EXPECT_EQ(v5e.ici_ports, 4);
  EXPECT_EQ(v5e.torus_wrap_size, 16);
  EXPECT_EQ(v5e.default_topology, (std::vector<int>{2, 4}));

  const ChipSpec v4 = V4Chip();
  EXPECT_EQ(v4.device_kind, "TPU v4");
  EXPECT_EQ(v4.tensorcores_per_chip, 2);
  EXPECT_EQ(v4.hbm_bytes, 32 * kGiB);
  EXPECT_DOUBLE_EQ(v4.hbm_bandwidth, 1200e9);
  EXPECT_EQ(v4.ici_ports, 6);
  EXPECT_EQ(v4.torus_wrap_size, 4);
  EXPECT_EQ(v4.default_topology, (std::vector<int>{2, 2, 1}));

  const ChipSpec v2 = V2Chip();
  EXPECT_EQ(v2.device_kind, "TPU v2");
  EXPECT_EQ(v2.mxus_per_tensorcore, 1);
  EXPECT_DOUBLE_EQ(v2.clock_hz, 700e6);
  EXPECT_EQ(v2.default_topology, (std::vector<int>{2, 2}));
  for (const ChipSpec& c : {v5e, v4, v2}) {
    EXPECT_EQ(c.chiplets_per_chip, 1) << c.name;
    EXPECT_EQ(c.chiplet_link_bandwidth, 0) << c.name;
  }
}

// The table (Google Cloud's TPU7x page compares the three).
TEST(ChipSpecTest, NewPresetFigures) {
  const ChipSpec v6e = V6eChip();
  EXPECT_EQ(v6e.device_kind, "TPU v6 lite");
  EXPECT_DOUBLE_EQ(v6e.peak_bf16_flops, 918e12);
  EXPECT_EQ(v6e.hbm_bytes, 32 * kGiB);
  EXPECT_DOUBLE_EQ(v6e.hbm_bandwidth, 1638e9);
  EXPECT_EQ(v6e.ici_ports, 4);
  EXPECT_DOUBLE_EQ(v6e.ici_ports * 2 * v6e.ici_link_bandwidth, 800e9);  // bidirectional per chip
  EXPECT_EQ(v6e.mxus_per_tensorcore, 2);
  EXPECT_EQ(v6e.mxu_rows, 256);
  EXPECT_EQ(v6e.vmem_bytes, 128 * kMiB);
  EXPECT_EQ(v6e.torus_wrap_size, 16);
  EXPECT_EQ(v6e.default_topology, (std::vector<int>{2, 4}));

  const ChipSpec v5p = V5pChip();
  EXPECT_EQ(v5p.device_kind, "TPU v5");
  EXPECT_DOUBLE_EQ(v5p.peak_bf16_flops, 459e12);
  EXPECT_EQ(v5p.hbm_bytes, 95 * kGiB);
  EXPECT_DOUBLE_EQ(v5p.hbm_bandwidth, 2765e9);
  EXPECT_EQ(v5p.ici_ports, 6);
  EXPECT_DOUBLE_EQ(v5p.ici_ports * 2 * v5p.ici_link_bandwidth, 1200e9);
  EXPECT_EQ(v5p.tensorcores_per_chip, 2);
  EXPECT_EQ(v5p.devices_per_chip, 1);
  EXPECT_EQ(v5p.torus_wrap_size, 4);
  EXPECT_EQ(v5p.default_topology, (std::vector<int>{2, 2, 1}));

  const ChipSpec x = Tpu7xChip();
  EXPECT_EQ(x.device_kind, "TPU7x");
  EXPECT_DOUBLE_EQ(x.peak_bf16_flops, 2307e12);
  EXPECT_EQ(x.hbm_bytes, 192 * kGiB);
  EXPECT_DOUBLE_EQ(x.hbm_bandwidth, 7380e9);
  EXPECT_DOUBLE_EQ(x.ici_ports * 2 * x.ici_link_bandwidth, 1200e9);
  EXPECT_EQ(x.devices_per_chip, 2);
  EXPECT_EQ(x.chiplets_per_chip, 2);
  EXPECT_DOUBLE_EQ(x.chiplet_link_bandwidth, 6 * x.ici_link_bandwidth);
  EXPECT_EQ(x.default_topology, (std::vector<int>{2, 2, 1}));
}

TEST(ChipSpecTest, PerDeviceFigures) {
  // v5e and v4 (megacore): one device per chip, so per device == per chip.
  for (const ChipSpec& c : {V5eChip(), V4Chip()}) {
    EXPECT_EQ(c.devices_per_chip, 1) << c.name;
    EXPECT_DOUBLE_EQ(c.peak_bf16_flops_per_device(), c.peak_bf16_flops) << c.name;
    EXPECT_EQ(c.hbm_bytes_per_device(), c.hbm_bytes) << c.name;
    EXPECT_DOUBLE_EQ(c.hbm_bandwidth_per_device(), c.hbm_bandwidth) << c.name;
  }
  // v2: a device is one of the chip's two cores and gets half of everything.
  const ChipSpec v2 = V2Chip();
  EXPECT_EQ(v2.devices_per_chip, 2);
  EXPECT_DOUBLE_EQ(v2.peak_bf16_flops_per_device(), 23e12);
  EXPECT_EQ(v2.hbm_bytes_per_device(), 8 * kGiB);
  EXPECT_DOUBLE_EQ(v2.hbm_bandwidth_per_device(), 350e9);
  EXPECT_DOUBLE_EQ(v2.hbm_bandwidth_per_chiplet(), 700e9);  // one die: both cores share it
  // TPU7x: a device is a chiplet with half the chip and its own HBM.
  const ChipSpec x = Tpu7xChip();
  EXPECT_DOUBLE_EQ(x.peak_bf16_flops_per_device(), 1153.5e12);
  EXPECT_EQ(x.hbm_bytes_per_device(), 96 * kGiB);
  EXPECT_DOUBLE_EQ(x.hbm_bandwidth_per_device(), 3690e9);
  EXPECT_DOUBLE_EQ(x.hbm_bandwidth_per_chiplet(), 3690e9);
}

void ExpectSameSpec(const ChipSpec& a, const ChipSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.device_kind, b.device_kind);
  EXPECT_EQ(a.tensorcores_per_chip, b.tensorcores_per_chip);
  EXPECT_EQ(a.devices_per_chip, b.devices_per_chip);
  EXPECT_EQ(a.chiplets_per_chip, b.chiplets_per_chip);
  EXPECT_EQ(a.chiplet_link_bandwidth, b.chiplet_link_bandwidth);
  EXPECT_EQ(a.mxus_per_tensorcore, b.mxus_per_tensorcore);
  EXPECT_EQ(a.mxu_rows, b.mxu_rows);
  EXPECT_EQ(a.mxu_cols, b.mxu_cols);
  EXPECT_EQ(a.clock_hz, b.clock_hz);  // exact: the JSON must round-trip doubles
  EXPECT_EQ(a.peak_bf16_flops, b.peak_bf16_flops);
  EXPECT_EQ(a.hbm_bytes, b.hbm_bytes);
  EXPECT_EQ(a.hbm_bandwidth, b.hbm_bandwidth);
  EXPECT_EQ(a.vmem_bytes, b.vmem_bytes);
  EXPECT_EQ(a.dataflow, b.dataflow);
  EXPECT_EQ(a.ici_ports, b.ici_ports);
  EXPECT_EQ(a.ici_link_bandwidth, b.ici_link_bandwidth);
  EXPECT_EQ(a.ici_hop_latency_s, b.ici_hop_latency_s);
  EXPECT_EQ(a.torus_wrap_size, b.torus_wrap_size);
  EXPECT_EQ(a.default_topology, b.default_topology);
  for (const auto& [field, member] : EnergyFields()) EXPECT_EQ(a.energy.*member, b.energy.*member) << field;
}

TEST(ChipSpecTest, JsonRoundTrip) {
  for (const ChipSpec& c : AllPresets()) {
    const std::string json = c.ToJson();
    auto back = ChipSpecFromJson(json, c.name + ".json");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ExpectSameSpec(*back, c);
    EXPECT_EQ(back->ToJson(), json);
  }
}

TEST(ChipSpecTest, ToJsonWritesEveryFieldByName) {
  const nlohmann::json j = nlohmann::json::parse(V4Chip().ToJson());
  const std::vector<std::string> fields = {
      "name", "device_kind", "tensorcores_per_chip", "devices_per_chip", "chiplets_per_chip",
      "chiplet_link_bandwidth", "mxus_per_tensorcore", "mxu_rows", "mxu_cols", "clock_hz",
      "peak_bf16_flops", "hbm_bytes", "hbm_bandwidth", "vmem_bytes", "dataflow",
      "ici_ports", "ici_link_bandwidth", "ici_hop_latency_s",
      "torus_wrap_size", "default_topology", "energy"};
  EXPECT_EQ(j.size(), fields.size());
  EXPECT_EQ(j["dataflow"], "ws");
  for (const std::string& f : fields) EXPECT_TRUE(j.contains(f)) << f;
  EXPECT_EQ(j["default_topology"], nlohmann::json({2, 2, 1}));
}

// The chiplet fields may be left out (chip files written before they
// existed): one die. A chip file with two chiplets round-trips.
TEST(ChipSpecTest, ChipletFieldsAreOptionalAndRoundTrip) {
  nlohmann::json j = nlohmann::json::parse(V5eChip().ToJson());
  j.erase("chiplets_per_chip");
  j.erase("chiplet_link_bandwidth");
  auto old = ChipSpecFromJson(j.dump(), "old.json");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->chiplets_per_chip, 1);
  EXPECT_EQ(old->chiplet_link_bandwidth, 0);
  EXPECT_EQ(old->ToJson(), V5eChip().ToJson());

  nlohmann::json two = nlohmann::json::parse(V4Chip().ToJson());
  two["name"] = "v4-split";
  two["devices_per_chip"] = 2;
  two["chiplets_per_chip"] = 2;
  two["chiplet_link_bandwidth"] = 250e9;
  auto split = ChipSpecFromJson(two.dump(), "split.json");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ(split->chiplets_per_chip, 2);
  EXPECT_EQ(split->chiplet_link_bandwidth, 250e9);
  auto back = ChipSpecFromJson(split->ToJson(), "back.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameSpec(*back, *split);
}

// "dataflow" may be left out (chip files written before it existed): ws.
TEST(ChipSpecTest, DataflowIsOptionalAndRoundTrips) {
  nlohmann::json j = nlohmann::json::parse(V5eChip().ToJson());
  j.erase("dataflow");
  auto c = ChipSpecFromJson(j.dump(), "old.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dataflow, kernels::Dataflow::kWeightStationary);
  j["dataflow"] = "os";
  c = ChipSpecFromJson(j.dump(), "os.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dataflow, kernels::Dataflow::kOutputStationary);
  auto back = ChipSpecFromJson(c->ToJson(), "again.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dataflow, kernels::Dataflow::kOutputStationary);
}

// "energy" may be left out (the 7 nm defaults); given, it round-trips.
TEST(ChipSpecTest, EnergyIsOptionalAndRoundTrips) {
  nlohmann::json j = nlohmann::json::parse(V5eChip().ToJson());
  EXPECT_EQ(j["energy"].size(), EnergyFields().size());
  EXPECT_DOUBLE_EQ(j["energy"]["hbm_byte_pj"].get<double>(), 43.75);
  j.erase("energy");
  auto c = ChipSpecFromJson(j.dump(), "old.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->energy.mac_pj, EnergySpec{}.mac_pj);
  double value = 1;
  j["energy"] = nlohmann::json::object();
  for (const auto& [field, member] : EnergyFields()) j["energy"][field] = value++;
  c = ChipSpecFromJson(j.dump(), "mine.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  value = 1;
  for (const auto& [field, member] : EnergyFields()) EXPECT_DOUBLE_EQ(c->energy.*member, value++) << field;
  auto back = ChipSpecFromJson(c->ToJson(), "again.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), c->ToJson());
}

TEST(ChipSpecTest, BadJsonNamesTheField) {
  const nlohmann::json good = nlohmann::json::parse(V5eChip().ToJson());
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"unknown field", [](nlohmann::json& j) { j["mxu_size"] = 128; },
       "unknown field 'mxu_size'"},
      {"missing field", [](nlohmann::json& j) { j.erase("clock_hz"); },
       "missing field 'clock_hz'"},
      {"missing topology", [](nlohmann::json& j) { j.erase("default_topology"); },
       "missing field 'default_topology'"},
      {"string for a number", [](nlohmann::json& j) { j["clock_hz"] = "fast"; },
       "field 'clock_hz' must be a number"},
      {"string for an integer", [](nlohmann::json& j) { j["ici_ports"] = "four"; },
       "field 'ici_ports' must be a number"},
      {"number for a string", [](nlohmann::json& j) { j["name"] = 7; },
       "field 'name' must be a string"},
      {"null for a string", [](nlohmann::json& j) { j["device_kind"] = nullptr; },
       "field 'device_kind' must be a string"},
      {"object for a topology", [](nlohmann::json& j) { j["default_topology"] = {{"x", 2}}; },
       "field 'default_topology' must be an array of integers"},
      {"non-integer topology axis", [](nlohmann::json& j) { j["default_topology"] = {2, 4.5}; },
       "field 'default_topology' holds 4.5: each axis must be an integer from 1 to 1024"},
      {"topology axis past an int", [](nlohmann::json& j) { j["default_topology"] = {uint64_t{4294967298}, uint64_t{1}}; },
       "field 'default_topology' holds 4294967298: each axis must be an integer from 1 to 1024"},
      {"non-integer int", [](nlohmann::json& j) { j["ici_ports"] = 2.5; },
       "field 'ici_ports' must be an integer"},
      {"non-integer bytes", [](nlohmann::json& j) { j["hbm_bytes"] = 1.5e9 + 0.5; },
       "field 'hbm_bytes' must be an integer"},
      {"negative bandwidth", [](nlohmann::json& j) { j["hbm_bandwidth"] = -1; },
       "field 'hbm_bandwidth' is -1, must be > 0 and at most 1e+16"},
      {"unknown dataflow", [](nlohmann::json& j) { j["dataflow"] = "row"; },
       "field dataflow 'row': ws (weight stationary), os (output stationary) or is (input stationary)"},
      {"number for a dataflow", [](nlohmann::json& j) { j["dataflow"] = 1; }, "field 'dataflow' must be a string"},
      {"negative vmem", [](nlohmann::json& j) { j["vmem_bytes"] = -1; },
       "field 'vmem_bytes' is -1, must be from 0 to"},
      {"negative ports", [](nlohmann::json& j) { j["ici_ports"] = -4; },
       "field 'ici_ports' is -4, must be from 0 to 64"},
      {"negative latency", [](nlohmann::json& j) { j["ici_hop_latency_s"] = -1e-6; },
       "field 'ici_hop_latency_s' is -1e-06, must be from 0 to 1"},
      {"negative wrap", [](nlohmann::json& j) { j["torus_wrap_size"] = -16; },
       "field 'torus_wrap_size' is -16, must be from 0 to 1024"},
      {"zero clock", [](nlohmann::json& j) { j["clock_hz"] = 0; },
       "field 'clock_hz' is 0, must be > 0 and at most 1e+11"},
      {"clock near the largest double", [](nlohmann::json& j) { j["clock_hz"] = 1e308; },
       "field 'clock_hz' is 1e+308, must be > 0 and at most 1e+11"},
      {"a 4097-row MXU", [](nlohmann::json& j) { j["mxu_rows"] = 4097; }, "field 'mxu_rows' is 4097, must be from 1 to 4096"},
      {"zero cores", [](nlohmann::json& j) { j["tensorcores_per_chip"] = 0; },
       "field 'tensorcores_per_chip' is 0, must be from 1 to 16"},
      {"devices not dividing cores", [](nlohmann::json& j) { j["devices_per_chip"] = 3; },
       "field 'devices_per_chip' must divide tensorcores_per_chip"},
      {"zero chiplets", [](nlohmann::json& j) { j["chiplets_per_chip"] = 0; },
       "field 'chiplets_per_chip' is 0, must be from 1 to 16"},
      {"string chiplets", [](nlohmann::json& j) { j["chiplets_per_chip"] = "two"; },
       "field 'chiplets_per_chip' must be a number"},
      {"chiplets not dividing devices", [](nlohmann::json& j) { j["chiplets_per_chip"] = 2; },
       "field 'chiplets_per_chip' must divide devices_per_chip"},
      {"negative chiplet link", [](nlohmann::json& j) { j["chiplet_link_bandwidth"] = -1; },
       "field 'chiplet_link_bandwidth' is -1, must be from 0 to 1e+15"},
      {"chiplets without a link",
       [](nlohmann::json& j) {
         j["tensorcores_per_chip"] = 2;
         j["devices_per_chip"] = 2;
         j["chiplets_per_chip"] = 2;
       },
       "field 'chiplet_link_bandwidth' is 0, must be > 0 when chiplets_per_chip is above 1"},
      {"a link without chiplets", [](nlohmann::json& j) { j["chiplet_link_bandwidth"] = 6e11; },
       "field 'chiplet_link_bandwidth' is 6e+11, must be 0 when chiplets_per_chip is 1"},
      {"four axes", [](nlohmann::json& j) { j["default_topology"] = {2, 2, 2, 2}; },
       "field 'default_topology' must have 1 to 3 axes"},
      {"zero axis", [](nlohmann::json& j) { j["default_topology"] = {2, 0}; },
       "field 'default_topology' holds 0: each axis must be an integer from 1 to 1024"},
      {"energy not an object", [](nlohmann::json& j) { j["energy"] = 3; }, "field 'energy' must be an object"},
      {"unknown energy field", [](nlohmann::json& j) { j["energy"]["sram_pj"] = 1; },
       "unknown field 'energy.sram_pj'"},
      {"missing energy field", [](nlohmann::json& j) { j["energy"].erase("ici_byte_pj"); },
       "missing field 'energy.ici_byte_pj'"},
      {"string energy", [](nlohmann::json& j) { j["energy"]["mac_pj"] = "low"; },
       "field 'energy.mac_pj' must be a number"},
      {"negative energy", [](nlohmann::json& j) { j["energy"]["hbm_byte_pj"] = -1; },
       "field 'energy.hbm_byte_pj' is -1, must be from 0 to 1e+06 pJ"},
      {"energy near the largest double", [](nlohmann::json& j) { j["energy"]["mac_pj"] = 1e308; },
       "field 'energy.mac_pj' is 1e+308, must be from 0 to 1e+06 pJ"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    auto r = ChipSpecFromJson(j.dump(), "chip.json");
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.what;
    EXPECT_THAT(r.status().message(), HasSubstr("chip.json")) << c.what;
  }
}

// Text that is not JSON is named by its place and nlohmann's reason (it was
// "x.json: not valid JSON" alone, even for a byte that is not UTF-8).
TEST(ChipSpecTest, NotJsonOrNotAnObject) {
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"{", "x.json:1:2: not valid JSON (unexpected end of input; expected string literal)"},
           {"", "x.json:1:1: not valid JSON (unexpected end of input"},
           {"clock_hz = 1", "x.json:1:1: not valid JSON (invalid literal"},
           {"{\"name\": \"x\",}", "x.json:1:14: not valid JSON (unexpected '}'; expected string literal)"},
           {"{\"name\": \"v\xff\"}", "x.json:1:12: not valid JSON (invalid string: ill-formed UTF-8 byte"},
           {"{\"clock_hz\": 1e999}", "x.json: not valid JSON (number overflow parsing '1e999')"}}) {
    auto r = ChipSpecFromJson(text, "x.json");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(message)) << text;
  }
  for (const char* text : {"[1]", "42", "\"v5e\"", "null"}) {
    auto r = ChipSpecFromJson(text, "x.json");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(r.status().message(), HasSubstr("x.json: a chip file must hold a JSON object"))
        << text;
  }
}

TEST(ChipSpecTest, IntegralFloatsAreAcceptedAsIntegers) {
  nlohmann::json j = nlohmann::json::parse(V5eChip().ToJson());
  j["ici_ports"] = 4.0;
  auto r = ChipSpecFromJson(j.dump(), "chip.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ici_ports, 4);
}

TEST(ChipSpecTest, LoadPresetByName) {
  for (const std::string& name : ChipPresetNames()) {
    auto c = LoadChipSpec(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    EXPECT_EQ(c->name, name);
  }
  auto v5e = LoadChipSpec("v5e");
  ASSERT_TRUE(v5e.ok());
  ExpectSameSpec(*v5e, V5eChip());
}

TEST(ChipSpecTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = "/nonexistent/dir/chip.json";
  auto missing = LoadChipSpec(path);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
  // A misspelt preset name is looked up as a path and fails the same way.
  auto typo = LoadChipSpec("v6p");
  EXPECT_EQ(typo.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(typo.status().message(),
              HasSubstr("chip 'v6p': neither a preset (v5e, v4, v2, v6e, v5p, tpu7x) nor a readable JSON file"));
}

TEST(ChipSpecTest, ExampleCustomChipLoads) {
  const std::string path = std::string(TPUMESH_SOURCE_DIR) + "/docs/examples/custom_chip.json";
  auto custom = LoadChipSpec(path);
  ASSERT_TRUE(custom.ok()) << custom.status().ToString();
  EXPECT_EQ(custom->name, "v5e-half-clock");
  EXPECT_TRUE(custom->Validate().ok());
  EXPECT_DOUBLE_EQ(custom->clock_hz, V5eChip().clock_hz / 2);
  EXPECT_EQ(custom->hbm_bytes, V5eChip().hbm_bytes);
  EXPECT_EQ(custom->default_topology, (std::vector<int>{2, 4}));
  EXPECT_NEAR(custom->mxu_peak_flops() / custom->peak_bf16_flops, 1.0, 0.01);
}

// A key given twice: JSON allows it and nlohmann keeps the last, so the file
// would mean whichever came second; refused, naming the key.
TEST(ChipSpecTest, AKeyGivenTwiceIsRefused) {
  std::string text = V5eChip().ToJson();
  text.insert(text.find('{') + 1, "\"name\": \"other\",");
  auto r = ChipSpecFromJson(text, "chip.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("chip.json: an object holds the key 'name' twice"));
}

}  // namespace
}  // namespace tpumesh::mesh
