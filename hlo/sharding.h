// How a global array is split over a mesh's devices, read from the two
// spellings JAX writes: Shardy's (#sdy.sharding<@mesh, [{"x"}, {}]>, with
// the module's sdy.mesh) and GSPMD's mhlo.sharding strings
// ("{devices=[2,4]<=[8]}", "{devices=[1,4,2]<=[2,4]T(1,0)
// last_tile_dim_replicate}", "{replicated}"). hlo/'s internal header.
//
// Contract: ShardOf gives, per array dimension, which of how many equal
// pieces device d holds; a dimension a sharding does not split is piece 0 of
// 1. Errors (InvalidArgument) name the construct that is not supported: sub
// axes, uneven splits, maximal shardings.
#ifndef TPUMESH_HLO_SHARDING_H_
#define TPUMESH_HLO_SHARDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "hlo/module.h"
#include "mesh/mesh.h"

namespace tpumesh::hlo {

struct Piece {
  int64_t index = 0, count = 1;
};

class Sharding {
 public:
  // Per dimension: the tile count; `device_tiles` maps device id -> its tile
  // coordinates (one per dimension).
  std::vector<int64_t> tiles;
  std::vector<std::vector<int64_t>> device_tiles;
  // device id -> which copy of its tile it holds (the devices a sharding
  // replicates over: GSPMD's last_tile_dim_replicate coordinate, Shardy's
  // position along the mesh axes no dimension names); empty: all 0.
  std::vector<int64_t> replica;
  // Shardy's unreduced={...}: the devices along those axes hold partial
  // values whose sum is the array's. device id -> its position along them
  // (not counted in `replica`); empty when there are none.
  std::vector<int64_t> unreduced;
  int64_t unreduced_count = 1;

  StatusOr<std::vector<Piece>> ShardOf(int device, const std::vector<int64_t>& dims) const;
};

// A Shardy sharding (the parsed <@mesh, [{"x"}, {}], unreduced={"y"}> dict)
// on a run whose mesh is `axes`: device id = row-major position over the
// sharding's own mesh, which must span as many devices (a mesh without axes
// is replicated).
StatusOr<Sharding> SdySharding(const Attr& sharding, const Module& m, const std::vector<mesh::MeshAxis>& axes);
// A GSPMD sharding string over `num_devices` devices.
StatusOr<Sharding> MhloSharding(const std::string& text, int num_devices);

// The mesh axes of the module's sdy.mesh @name (empty when there is none);
// without a name, of its first mesh that has axes (JAX declares an axis-less
// @empty_mesh beside the program's mesh, in either order).
std::vector<mesh::MeshAxis> SdyMeshAxes(const Module& m, const std::string& name = "");

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_SHARDING_H_
