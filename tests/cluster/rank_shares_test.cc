// Per-rank weights (issue 30): a process loads and keeps only the shares of
// the model ranks its devices hold (pipeline/loader.h LoadTextToImage with
// models::ModelRanks, LocalModelRanks of the mesh). ctest runs this binary
// alone and under mpirun -np 2 and -np 4; every rank runs every test.
//
// - The shares a process keeps are the same bytes as the shares of a
//   process that keeps every model rank (the loader's single-process path),
//   with and without a LoRA fused before the split.
// - The model ranks it does not keep have the shapes, dtypes and byte counts
//   of the real shares (so HBM accounting and param_bytes are unchanged) but
//   no host page mapped (mincore), while the kept ones are resident.
// - The host-memory estimate before loading counts those kept bytes.
// - LocalModelRanks is the set of the model ranks of the mesh's local
//   devices: every rank for one process; under mpirun, data=2,model=4 over 4
//   ranks of 2 devices keeps 2 of the 4 on each rank.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/model_file.h"
#include "mesh/cluster.h"
#include "mesh/mesh.h"
#include "models/params.h"
#include "pipeline/convert.h"
#include "pipeline/default_model.h"
#include "pipeline/loader.h"
#include "pipeline/lora.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::pipeline {
namespace {

mesh::Cluster* g_cluster = nullptr;

// Pages of `a`'s storage mapped in this process (mincore), or -1.
int64_t ResidentPages(const mesh::Array& a) {
  if (a.size_bytes() == 0) return 0;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(a.raw()) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(a.raw()) + static_cast<uintptr_t>(a.size_bytes());
  std::vector<unsigned char> in((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return -1;
  int64_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

std::unique_ptr<ModelFile> DefaultModel() {
  auto file = ModelFile::OpenImage(DefaultModelBytes(), "the embedded default model");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

// `part` against `whole` (the same model loaded for every model rank):
// local ranks bit for bit and resident, the others lazy zeros of the same
// shapes, dtypes and bytes. Returns how many split parameters of a rank that
// is not local were checked.
int ExpectLocalSharesOnly(const TextToImage& whole, const TextToImage& part, const models::ModelRanks& ranks) {
  int split_elsewhere = 0;
  const std::vector<ComponentParams> wc = whole.components(), pc = part.components();
  EXPECT_EQ(wc.size(), pc.size());
  for (size_t c = 0; c < wc.size() && c < pc.size(); ++c) {
    const std::vector<models::ParamMap>& w = *wc[c].ranks;
    const std::vector<models::ParamMap>& p = *pc[c].ranks;
    EXPECT_EQ(p.size(), static_cast<size_t>(ranks.count)) << wc[c].name;
    if (p.size() != w.size()) continue;
    for (int r = 0; r < ranks.count; ++r) {
      EXPECT_EQ(p[r].rank(), r);
      EXPECT_EQ(p[r].bytes(), w[r].bytes()) << wc[c].name << " rank " << r;
      for (const models::ParamSpec& spec : wc[c].manifest) {
        const mesh::Array& a = p[r][spec.name];
        const mesh::Array& b = w[r][spec.name];
        const std::string what = wc[c].name + "/" + spec.name + " of model rank " + std::to_string(r);
        EXPECT_EQ(a.dtype(), b.dtype()) << what;
        EXPECT_EQ(a.shape(), b.shape()) << what;
        if (a.size_bytes() == 0) continue;
        if (ranks.is_local(r)) {
          EXPECT_TRUE(a.BitwiseEquals(b)) << what;
          EXPECT_GT(ResidentPages(a), 0) << what;
        } else {
          EXPECT_EQ(ResidentPages(a), 0) << what << " holds host pages on a rank that does not keep it";
          if (spec.split.SplitsOver(ranks.count)) ++split_elsewhere;
        }
      }
    }
  }
  return split_elsewhere;
}

TEST(RankSharesTest, KeepsOnlyTheLocalModelRanksShares) {
  auto file = DefaultModel();
  ASSERT_NE(file, nullptr);
  auto whole = LoadTextToImage(*file, 4);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  for (const std::vector<bool>& local :
       {std::vector<bool>{false, true, false, true}, std::vector<bool>{true, false, false, false},
        std::vector<bool>{false, false, true, true}}) {
    const models::ModelRanks ranks(4, local);
    auto part = LoadTextToImage(*file, ranks);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    EXPECT_GT(ExpectLocalSharesOnly(**whole, **part, ranks), 0) << "no split parameter was checked";
  }
  // Every rank local: the single-process load.
  auto all = LoadTextToImage(*file, models::ModelRanks(4, {true, true, true, true}));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(ExpectLocalSharesOnly(**whole, **all, 4), 0);
}

// The host-memory estimate before loading (generate refuses a model that
// cannot fit) counts what this process will hold: the distinct bytes of the
// kept shares, exactly; every rank: the whole model's estimate.
TEST(RankSharesTest, HostMemoryEstimateCountsTheKeptShares) {
  auto file = DefaultModel();
  ASSERT_NE(file, nullptr);
  auto whole = EstimateHostMemory(*file);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto all = EstimateHostMemory(*file, models::ModelRanks(4, {true, true, true, true}));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->total(), whole->total());
  for (const std::vector<bool>& local : {std::vector<bool>{true, false, false, false},
                                         std::vector<bool>{false, true, false, true}}) {
    const models::ModelRanks ranks(4, local);
    auto est = EstimateHostMemory(*file, ranks);
    ASSERT_TRUE(est.ok()) << est.status().ToString();
    EXPECT_LT(est->total(), whole->total());
    auto part = LoadTextToImage(*file, ranks);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    std::set<const void*> seen;
    int64_t kept = 0;
    for (const ComponentParams& c : (*part)->components())
      for (int r = 0; r < ranks.count; ++r)
        if (ranks.is_local(r))
          for (const auto& [name, a] : (*c.ranks)[r].all())
            if (seen.insert(a.raw()).second) kept += a.size_bytes();
    EXPECT_EQ(est->f32_bytes + est->bf16_bytes, kept);
  }
}

// A LoRA is fused into the whole weight before the split, also when the
// process keeps only some ranks: its share is the same bytes.
TEST(RankSharesTest, FusedLoraSharesAreTheSameBytes) {
  const std::string model = tpumesh::testing::ProcessTempDir() + "/rank_shares_tiny_sdxl_b.h5";
  auto converted = ConvertDiffusersFolder(std::string(TPUMESH_TEST_DATA_DIR) + "/tiny-sdxl-b", model,
                                          mesh::DType::kF32);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  auto file = ModelFile::Open(model);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto targets = ReadLoraTargets(**file);
  ASSERT_TRUE(targets.ok()) << targets.status().ToString();
  auto loras = LoraSet::Open({{std::string(TPUMESH_TEST_DATA_DIR) + "/lora/sdxl_kohya.safetensors", 1.5}}, *targets);
  ASSERT_TRUE(loras.ok()) << loras.status().ToString();
  auto whole = LoadTextToImage(**file, 2, &*loras);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto plain = LoadTextToImage(**file, 2);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  for (int keep = 0; keep < 2; ++keep) {
    const models::ModelRanks ranks(2, {keep == 0, keep == 1});
    auto part = LoadTextToImage(**file, ranks, &*loras);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    EXPECT_GT(ExpectLocalSharesOnly(**whole, **part, ranks), 0);
  }
  // The LoRA changed the kept shares (so the comparison above can fail).
  int changed = 0;
  const auto wc = (*whole)->components(), pc = (*plain)->components();
  for (size_t c = 0; c < wc.size(); ++c)
    for (const auto& [name, a] : (*wc[c].ranks)[1].all()) changed += !a.BitwiseEquals((*pc[c].ranks)[1][name]);
  EXPECT_GT(changed, 0);
}

// The default mesh mapping keeps a model group inside a rank where it fits
// (mesh/mesh.h): LocalModelRanks names exactly the model ranks of this
// rank's devices.
TEST(RankSharesTest, LocalModelRanksAreThoseOfThisRanksDevices) {
  const int np = g_cluster->size();
  for (const char* axes : {"data=8", "data=4,model=2", "data=2,model=4"}) {
    mesh::MeshSpec spec;
    spec.devices = 8;
    spec.axes = axes;
    spec.cluster = g_cluster;
    auto m = mesh::CreateDataModelMesh(spec);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const models::ModelRanks ranks = LocalModelRanks(**m);
    const int model = (*m)->axes()[1].size;
    ASSERT_EQ(ranks.count, model) << axes;
    std::set<int> held;
    for (int d = (*m)->first_local(); d < (*m)->first_local() + (*m)->num_local(); ++d)
      held.insert((*m)->AxisIndices(d)[1]);
    int kept = 0;
    for (int r = 0; r < model; ++r) {
      EXPECT_EQ(ranks.is_local(r), held.count(r) == 1) << axes << " model rank " << r;
      kept += ranks.is_local(r);
    }
    // 8 / np devices here, a model group of `model` devices kept together.
    EXPECT_EQ(kept, std::min(model, 8 / np)) << axes << " on " << np << " ranks";
  }
}

// Under mpirun: generate's loader call on this rank's mesh keeps its
// devices' shares only.
TEST(RankSharesTest, EachRankKeepsItsDevicesShares) {
  mesh::MeshSpec spec;
  spec.devices = 8;
  spec.axes = "data=2,model=4";
  spec.cluster = g_cluster;
  auto m = mesh::CreateDataModelMesh(spec);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto file = DefaultModel();
  ASSERT_NE(file, nullptr);
  auto whole = LoadTextToImage(*file, 4);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const models::ModelRanks ranks = LocalModelRanks(**m);
  auto part = LoadTextToImage(*file, ranks);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  const int elsewhere = ExpectLocalSharesOnly(**whole, **part, ranks);
  if (g_cluster->size() >= 4) {
    EXPECT_GT(elsewhere, 0);
  }
  if (g_cluster->size() == 1) {
    EXPECT_EQ(elsewhere, 0);
  }
}

}  // namespace
}  // namespace tpumesh::pipeline

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto cluster = tpumesh::mesh::ConnectCluster();
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  tpumesh::pipeline::g_cluster = *cluster;
  return RUN_ALL_TESTS();
}
