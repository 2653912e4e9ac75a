// tpumesh's systolic cycles against SCALE-Sim v2's own, layer by layer: its
// example topologies (two conv networks, three GEMM lists, copied from its
// repository) read by io/workload.h and priced on one 128 x 128 array in
// each dataflow give SCALE-Sim's "Total Cycles" + 1 for every layer (it
// reports the last cycle's index, counting from 0). The reference numbers
// come from running SCALE-Sim (tests/data/scalesim/README.md).
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/workload.h"
#include "kernels/matmul_cost.h"

namespace tpumesh::pipeline {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Reference {
  std::string topology;
  int layer = 0;
  std::map<kernels::Dataflow, int64_t> cycles;
};

std::vector<Reference> ReadReference(const std::string& path) {
  std::vector<Reference> refs;
  std::istringstream in(Slurp(path));
  std::string line;
  std::getline(in, line);  // topology,layer,ws,os,is
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream row(line);
    std::string topology, layer, ws, os, is;
    std::getline(row, topology, ',');
    std::getline(row, layer, ',');
    std::getline(row, ws, ',');
    std::getline(row, os, ',');
    std::getline(row, is, ',');
    refs.push_back({topology, std::stoi(layer),
                    {{kernels::Dataflow::kWeightStationary, std::stoll(ws)},
                     {kernels::Dataflow::kOutputStationary, std::stoll(os)},
                     {kernels::Dataflow::kInputStationary, std::stoll(is)}}});
  }
  return refs;
}

TEST(ScaleSimTest, EveryLayerOfItsExampleTopologiesTakesItsCyclesPlusOne) {
  const std::string dir = std::string(TPUMESH_TEST_DATA_DIR) + "/scalesim/";
  const std::vector<Reference> refs = ReadReference(dir + "scalesim_v2_total_cycles.csv");
  ASSERT_EQ(refs.size(), 25u);
  std::map<std::string, std::vector<WorkloadLayer>> topologies;
  for (const char* name : {"test.csv", "alexnet.csv", "test_mnk_input.csv", "transformer_partial.csv", "NCF.csv"}) {
    auto layers = ParseWorkload(Slurp(dir + name), name, kernels::Precision::kDefault);
    ASSERT_TRUE(layers.ok()) << layers.status().ToString();
    topologies[name] = *layers;
  }
  int compared = 0;
  for (const Reference& ref : refs) {
    const auto& layers = topologies.at(ref.topology);
    ASSERT_LT(ref.layer, static_cast<int>(layers.size())) << ref.topology;
    const mesh::MxuMatmul& mm = layers[ref.layer].record.mxu.at(0);
    for (const auto& [dataflow, total_cycles] : ref.cycles) {
      const kernels::SystolicArray one(128, 128, 1, 1e9, dataflow);
      const int64_t ours = kernels::MatmulCost(mm.m, mm.n, mm.k, kernels::Precision::kDefault, one).cycles;
      EXPECT_EQ(ours, total_cycles + 1) << ref.topology << " layer " << ref.layer << " ("
                                        << layers[ref.layer].record.module << ") "
                                        << kernels::DataflowName(dataflow);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 75);
}

}  // namespace
}  // namespace tpumesh::pipeline
