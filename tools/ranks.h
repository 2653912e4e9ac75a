// How a command that runs work (generate, eval, simulate, run) behaves when
// started as one of several ranks (mpirun, srun; docs/cluster.md): it joins
// the cluster, every rank reads its inputs and runs the same checks, the
// ranks agree before any work that every input is the same on every rank
// and no rank failed, rank 0 alone prints and writes, and an error on any
// rank ends every rank with one line.
//
// Contract:
// - JoinCluster() connects (mesh::ConnectCluster) once per process, checks
//   that every rank runs the same command line (RememberCommandLine), and
//   remembers the cluster for main: a command's error under several ranks
//   ends through Cluster::Fail (EndOnError), at once when it arises inside
//   a pmap (Cluster::fail_fast: a rank interrupted or failing mid-run does
//   not wait for the others to finish their steps). One process: the local
//   cluster.
// - AgreeToStart is collective: every rank calls it once its checks and
//   reads are done, with their status. It returns OK on every rank only
//   when every rank's status is OK and every input file has the same
//   contents on every rank (a digest: the whole file up to 64 MiB, else its
//   size and first and last 4 MiB); otherwise the lowest failing rank's
//   error (a mismatch is rank 0's: "--prompts-file p.txt: rank 1's copy
//   differs from rank 0's ...") on that rank and Cancelled on the others
//   (mesh::Cluster::Agree), so that it is printed once.
// - AgreeToFinish(status): every rank learns whether rank 0 wrote its
//   outputs; a rank other than 0 waits for it without the cluster's
//   timeout (rank 0 may still be computing alone: `run`).
#ifndef TPUMESH_TOOLS_RANKS_H_
#define TPUMESH_TOOLS_RANKS_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/cluster.h"

namespace tpumesh::tools {

// main's arguments (after the program name), which JoinCluster compares
// across ranks: a rank started with other arguments is refused before any
// work, naming the first that differs.
void RememberCommandLine(int argc, char** argv);
StatusOr<mesh::Cluster*> JoinCluster();
// The cluster JoinCluster joined; null when no command joined one.
mesh::Cluster* JoinedCluster();
// Whether this process prints and writes: rank 0, or no cluster joined.
bool IsRootRank();

// (flag, path) pairs; empty paths are skipped.
Status AgreeToStart(mesh::Cluster& cluster, const Status& ready,
                    const std::vector<std::pair<std::string, std::string>>& inputs);
Status AgreeToFinish(mesh::Cluster& cluster, const Status& done);

// The digest AgreeToStart compares (exposed for tests): FNV-1a 64 of the
// bytes read, with the file's size.
StatusOr<std::string> InputDigest(const std::string& path);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_RANKS_H_
