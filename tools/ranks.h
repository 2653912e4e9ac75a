// How a command that runs work (generate, eval, simulate, run) behaves when
// started as one of several ranks (mpirun, srun; docs/cluster.md): it joins
// the cluster, every rank reads its inputs and runs the same checks, the
// ranks agree before any work that every input is the same on every rank
// and no rank failed, rank 0 alone prints and writes, and an error on any
// rank ends every rank with one line. RunOnRanks is that protocol, written
// once; a command gives it its steps.
//
// Contract:
// - RunOnRanks(steps), on every rank:
//     1. JoinCluster();
//     2. steps.check: the checks and reads, on every rank; it lists the
//        input files (flag, path) whose contents every rank must share;
//     3. AgreeToStart on check's status and those inputs: an error (this
//        rank's or another's) returns here, before any work;
//     4. the work: steps.work on every rank, whose error returns at once
//        (the failing rank ends the others: main's EndOnError), then
//        steps.finish on every rank (rank 0 writes the outputs, all or
//        none; another rank says whether it finished: interrupted, say);
//        or, when steps.root_alone, steps.work on rank 0 alone (it
//        prints and writes itself) while the others wait, and its status
//        stands for finish's;
//     5. AgreeToFinish on finish's status (mesh::Cluster::Agree: the
//        lowest failing rank's error there, Cancelled on the others);
//     6. rank 0: steps.report (the lines after the outputs are written).
//   One process is the same with a cluster of one: the agreements return
//   the statuses given. An empty finish or report is OK and nothing.
//
// The pieces, for the protocol and its tests:
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

#include <functional>
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

// A command's steps under the protocol (RunOnRanks, above). The callables
// run on the calling thread, in order; they capture the command's state.
struct RankSteps {
  using Inputs = std::vector<std::pair<std::string, std::string>>;  // (flag, path); empty paths skipped
  std::function<Status(mesh::Cluster& cluster, Inputs* inputs)> check;
  std::function<Status(mesh::Cluster& cluster)> work;
  bool root_alone = false;  // work on rank 0 alone, the others waiting
  std::function<Status(mesh::Cluster& cluster)> finish;
  std::function<void()> report;  // rank 0
};
Status RunOnRanks(const RankSteps& steps);

// The digest AgreeToStart compares (exposed for tests): FNV-1a 64 of the
// bytes read, with the file's size.
StatusOr<std::string> InputDigest(const std::string& path);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_RANKS_H_
