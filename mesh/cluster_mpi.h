// Internal to mesh/cluster.cc: the MPI transport behind Cluster, compiled
// only when the build found MPI (TPUMESH_MPI); without it MpiAvailable() is
// false and ConnectMpi() fails. No MPI header is included here.
#ifndef TPUMESH_MESH_CLUSTER_MPI_H_
#define TPUMESH_MESH_CLUSTER_MPI_H_

#include "base/status.h"
#include "mesh/cluster.h"

namespace tpumesh::mesh::internal {

bool MpiAvailable();
// Initializes MPI once (threads: serialized) and returns the world as a
// Cluster that lives until exit, when MPI is finalized.
StatusOr<Cluster*> ConnectMpi();

}  // namespace tpumesh::mesh::internal

#endif  // TPUMESH_MESH_CLUSTER_MPI_H_
