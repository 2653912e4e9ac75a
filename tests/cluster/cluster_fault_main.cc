// A program whose rank 1 fails, for tests/cluster/expect_one_failure.sh:
//   cluster_fault_main in-pmap       rank 1's first device returns an error
//                                    before the pmap's first psum
//   cluster_fault_main before-pmap   rank 1 fails before it reaches the pmap
//                                    (bad input seen by that rank only)
// Every rank then ends through Cluster::Fail: one line from rank 1, a
// non-zero exit from all, no hang.
#include <cstdio>
#include <string>
#include <vector>

#include "mesh/cluster.h"
#include "mesh/collectives.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {
namespace {

Status Run(Cluster& cluster, const std::string& mode) {
  MeshOptions o;
  o.cluster = &cluster;
  TPUMESH_ASSIGN_OR_RETURN(auto mesh, Mesh::Create(V5eChip(), {2, 4}, {{"data", 4}, {"model", 2}}, o));
  if (mode == "before-pmap" && cluster.rank() == 1)
    return InvalidArgumentError("bad input seen by rank 1 only");
  TPUMESH_ASSIGN_OR_RETURN(DistributedArray x, mesh->Replicate(Array::Host(DType::kF32, {1024})));
  const int victim = mesh->num_devices() / cluster.size();  // rank 1's first device
  auto out = mesh->Pmap(
      [&](DeviceContext& ctx, std::span<const Array> a) -> StatusOr<std::vector<Array>> {
        if (mode == "in-pmap" && ctx.device_id() == victim)
          return InvalidArgumentError("bad input seen by rank 1 only");
        TPUMESH_ASSIGN_OR_RETURN(Array s, ctx.Psum(a[0], {"data", "model"}));
        return std::vector<Array>{s};
      },
      std::span<const DistributedArray>(&x, 1));
  return out.status();
}

}  // namespace
}  // namespace tpumesh::mesh

int main(int argc, char** argv) {
  using namespace tpumesh::mesh;
  if (argc != 2) {
    std::fprintf(stderr, "usage: cluster_fault_main in-pmap|before-pmap\n");
    return 2;
  }
  auto cluster = ConnectCluster();
  if (!cluster.ok()) {
    std::fprintf(stderr, "tpumesh: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  tpumesh::Status s = Run(**cluster, argv[1]);
  if (!s.ok()) (*cluster)->Fail(s);
  std::printf("rank %d: no failure\n", (*cluster)->rank());
  return 0;
}
