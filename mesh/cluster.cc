#include "mesh/cluster.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "mesh/cluster_mpi.h"

namespace tpumesh::mesh {
int LaunchedRanks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  }
  return 0;
}

namespace {

class OneProcess final : public Cluster {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string transport() const override { return "local"; }
  StatusOr<std::vector<Bytes>> Exchange(std::span<const Outgoing> to) override {
    if (to.size() != 1) return InternalError("Exchange: " + std::to_string(to.size()) + " blobs for 1 rank");
    Bytes b;
    b.reserve(static_cast<size_t>(to[0].size()));
    for (const auto& p : to[0].parts) b.insert(b.end(), p.begin(), p.end());
    std::vector<Bytes> out;
    out.push_back(std::move(b));
    return out;
  }
  Status Barrier() override { return OkStatus(); }
  [[noreturn]] void Fail(const Status& status) override {
    std::fprintf(stderr, "%s\n", FailureLine(status).c_str());
    std::fflush(stderr);
    std::exit(1);
  }
};

}  // namespace

Cluster::Cluster() : timeout_s_(600) {
  if (const char* v = std::getenv("TPUMESH_CLUSTER_TIMEOUT"); v != nullptr && std::atof(v) > 0)
    timeout_s_ = std::atof(v);
}

std::string Cluster::FailureLine(const Status& status) const {
  return "tpumesh: rank " + std::to_string(rank()) + " of " + std::to_string(size()) + ": " +
         status.ToString();
}

StatusOr<std::vector<Bytes>> Cluster::AllGatherBytes(std::span<const std::byte> mine) {
  std::vector<Outgoing> to(size());
  for (auto& o : to) o.parts.push_back(mine);
  return Exchange(to);
}

StatusOr<std::vector<Bytes>> Cluster::GatherBytes(std::span<const std::byte> mine, int root) {
  std::vector<Outgoing> to(size());
  to[root].parts.push_back(mine);
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Bytes> from, Exchange(to));
  if (rank() != root) from.clear();
  return from;
}

Status Cluster::Agree(const Status& mine) {
  if (size() == 1) return mine;
  // code (4 bytes, native order) + message.
  const int32_t code = static_cast<int32_t>(mine.code());
  Bytes blob(sizeof code + mine.message().size());
  std::memcpy(blob.data(), &code, sizeof code);
  if (!mine.message().empty()) std::memcpy(blob.data() + sizeof code, mine.message().data(), mine.message().size());
  TPUMESH_ASSIGN_OR_RETURN(std::vector<Bytes> all, AllGatherBytes(blob));
  for (int r = 0; r < size(); ++r) {
    if (all[r].size() < sizeof code) return InternalError("Agree: a short message from rank " + std::to_string(r));
    int32_t c = 0;
    std::memcpy(&c, all[r].data(), sizeof c);
    if (c == static_cast<int32_t>(StatusCode::kOk)) continue;
    if (r == rank()) return mine;
    NoteRemoteFailure(r);
    const std::string message(reinterpret_cast<const char*>(all[r].data()) + sizeof c, all[r].size() - sizeof c);
    return CancelledError("rank " + std::to_string(r) + " failed: " + message);
  }
  return OkStatus();
}

Cluster& LocalCluster() {
  static OneProcess* local = new OneProcess();  // never destroyed: used until exit
  return *local;
}

bool ClusterHasMpi() { return internal::MpiAvailable(); }

StatusOr<Cluster*> ConnectCluster() {
  const int launched = LaunchedRanks();
  if (launched <= 1) return &LocalCluster();
  if (!internal::MpiAvailable()) {
    return FailedPreconditionError(
        "started as one of " + std::to_string(launched) +
        " ranks (mpirun or srun), but this tpumesh was built without MPI: rebuild with libopenmpi-dev "
        "installed (TPUMESH_MPI=ON), or run one process");
  }
  return internal::ConnectMpi();
}

}  // namespace tpumesh::mesh
