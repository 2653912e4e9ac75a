// The build without MPI (TPUMESH_MPI off or MPI not found): one process only.
#include "mesh/cluster_mpi.h"

namespace tpumesh::mesh::internal {

bool MpiAvailable() { return false; }

StatusOr<Cluster*> ConnectMpi() {
  return FailedPreconditionError("this tpumesh was built without MPI (TPUMESH_MPI=OFF)");
}

}  // namespace tpumesh::mesh::internal
