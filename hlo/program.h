// A StableHLO module run over a whole emulated mesh: how its arguments map
// onto devices, inputs from and outputs to HDF5, and one call of @main on
// every device (a pmap), or a dry run that prices it without computing.
//
// Layouts, told apart by the module's own attributes:
// - kReplicas (mhlo.num_replicas = N > 1; jax.pmap in jax 0.4): @main is one
//   device's program; each global argument carries a leading device axis of
//   N (as jax.pmap's arrays) and device d gets slice d; outputs are stacked
//   the same way.
// - kGlobal (anything else; jit, and pmap / shard_map in newer jax as
//   sdy.manual_computation, shard_map in 0.4 as @SPMDFullToShardShape):
//   @main sees global arrays, every device holds and computes them (a
//   replicated program), and each manual computation runs per device on its
//   shard. The devices are mhlo.num_partitions, on the axes of the module's
//   sdy.mesh when it has one. Sharding annotations of a jit program
//   (mhlo.sharding, sdy.sharding) do not split the computation: every
//   device computes the whole program, priced as XLA's partitioner would
//   split it (hlo/partition.h, docs/stablehlo.md).
//
// Contract: ReadInputs checks every dataset against @main's argument types
// (one error naming the file, the dataset, what was expected and found);
// the run and the outputs are the same bits for any thread count.
#ifndef TPUMESH_HLO_PROGRAM_H_
#define TPUMESH_HLO_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "hlo/interpreter.h"
#include "io/h5io.h"
#include "hlo/module.h"
#include "mesh/mesh.h"

namespace tpumesh::hlo {

struct Layout {
  enum class Kind { kReplicas, kGlobal };
  Kind kind = Kind::kGlobal;
  int devices = 1;
  std::vector<mesh::MeshAxis> axes;  // from sdy.mesh; empty: data=devices
  std::vector<Type> inputs;          // global argument types (kReplicas: with the device axis)
  std::vector<Type> outputs;         // global result types
  std::string Describe() const;      // "pmap over 8 replicas", "global arrays on 8 devices (mesh x=2,y=4)"
};
StatusOr<Layout> LayoutOf(const Module& m);
// The mesh the module needs unless the user said: devices and axes.
mesh::MeshSpec DefaultMeshSpec(const Layout& layout, mesh::MeshSpec user);

// Which piece of @main's argument `i` (or, with `result`, result `i`)
// partition `device` holds under its declared sharding (mhlo.sharding, or
// sdy.sharding over the layout's axes): per dimension, which of how many
// equal pieces. Undeclared or replicated: every dimension piece 0 of 1.
// kReplicas layouts have none (InvalidArgument). Errors name the sharding
// that is not supported (uneven splits, sub axes).
struct ArrayPiece {
  std::vector<int64_t> index, count;  // per dimension
  int64_t replica = 0;                // which copy of the piece (Sharding::replica)
  // Unreduced axes (Sharding::unreduced): the piece is the device's partial
  // value, number `unreduced` of `unreduced_count` whose sum is the piece.
  int64_t unreduced = 0, unreduced_count = 1;
};
StatusOr<ArrayPiece> DeclaredPiece(const Module& m, const Layout& layout, bool result, size_t i, int device);

// Datasets input_0 ... input_{n-1}: bf16 as uint16 with dtype="bfloat16",
// pred as uint8 / bool with dtype="bool"; float datasets are accepted for
// any float argument (rounded), integer datasets for integer arguments.
StatusOr<std::vector<Tensor>> ReadInputs(const std::string& file, const Layout& layout);
// Uniform in [-1, 1) for floats, [0, 4) for integers, random bits for u32
// and u64 (keys), from `seed`.
std::vector<Tensor> RandomInputs(const Layout& layout, uint64_t seed);
// Argument i from its elements as a dataset holds them (an HDF5 dataset; a
// numpy array in the Python module), checked and converted as ReadInputs
// does each dataset; `where` names it in errors.
StatusOr<Tensor> InputFromRaw(const pipeline::H5Raw& raw, const Layout& layout, size_t i, const std::string& where);
// output_0 ... as H5Raw datasets, for an H5Writer.
std::vector<std::pair<std::string, pipeline::H5Raw>> OutputDatasets(const std::vector<Tensor>& outputs);

struct ProgramRun {
  std::vector<Tensor> outputs;                        // global; empty in a dry run
  // kGlobal, not a dry run: [output][device], each device's own view of the
  // whole result as host bytes, where the devices' views differ: a result
  // declared replicated whose replicas computed different values (pmap's
  // out_axes=None, shard_map with check_vma off), where each device keeps
  // its own. Empty for an output every device sees as outputs[i].
  std::vector<std::vector<mesh::Array>> device_views;
  // A dry run of a program with an sdy mesh: per result whose sharding
  // @main leaves to the compiler (no sdy.sharding or mhlo.sharding), the
  // #sdy.sharding the partitioner's propagation gives it (as XLA's
  // propagation decides the result's layout), as a parsed attribute; a kUnit
  // Attr where the result is declared, replicated, or laid out on device
  // groups no mesh axes spell.
  std::vector<Attr> inferred_result_shardings;
  std::vector<std::vector<mesh::OpRecord>> records;   // per device
  std::vector<int> record_of_device;                  // device -> index in records
  double host_seconds = 0;
  std::vector<int64_t> hbm_peak_bytes;                // per device
};

// Runs @main once on `mesh` (whose device count must be the layout's).
// dry_run: device 0 alone, priced, standing for every device.
StatusOr<ProgramRun> RunProgram(const Module& m, const Layout& layout, mesh::Mesh& mesh, std::vector<Tensor> inputs,
                                const Options& options);

}  // namespace tpumesh::hlo

#endif  // TPUMESH_HLO_PROGRAM_H_
