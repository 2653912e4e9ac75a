// Cluster: the processes (ranks) one emulated mesh is spread over, and the
// few ways they talk: exchange byte blobs, wait for each other, and stop all
// together when one fails. The mesh's collectives rendezvous through it
// (collectives.h); nothing else in mesh/ knows how ranks are connected.
//
// Contract:
// - Every rank runs the same program (SPMD): the same meshes, the same
//   Pmaps in the same order. Exchange and Barrier are collective: every rank
//   calls them, in the same order, from one thread at a time.
// - Exchange sends to[r] to rank r and returns what every rank sent to this
//   one (from[r]; from[rank()] is to[rank()]). It waits at most timeout()
//   seconds for the others; it fails (never hangs) when that runs out or when
//   another rank reported a failure (Fail), naming that rank and its message.
// - Fail(status) is how a rank that cannot go on ends: the first rank to fail
//   prints one line, "tpumesh: rank R of N: <status>", tells every other
//   rank out of band (their waits end with its message), and the process
//   exits with status 1. A rank whose error came from another rank exits 1
//   without a line of its own: the cause was printed once, where it arose.
//   Ranks that fail on their own at about the same time (every rank
//   interrupted at once) print one line between them: rank R > 0 first
//   waits up to min(R, 4) / 2 seconds for another rank's notice and stays
//   quiet if one comes.
// - CheckFailures() returns at once: the failure another rank reported, if
//   one came (then as Exchange would fail), else OK. Not collective.
// - fail_fast() (off unless set; the commands set it, since any error ends
//   them): a pmap (Mesh::Pmap) whose device fails on its own ends the job
//   at once through Fail, without waiting for the other ranks' devices to
//   come to the pmap's last round, and a pmap whose devices are computing
//   notices another rank's failure within 0.1 s and ends quietly through
//   Fail. Off, a pmap returns the error on every rank once every device of
//   every rank has returned (the library's contract: collectives.h).
// - Agree(mine) is how ranks settle a step that may fail on some of them
//   (inputs read, checks before work): collective; every rank learns every
//   rank's status, and the lowest failing rank's error is the step's. That
//   rank gets its own status back; the others get Cancelled("rank R failed:
//   ...") and are marked as failing because of it (NoteRemoteFailure), so
//   that when each then ends through Fail the cause is printed once.
// - GatherBytes(mine, root) gives `root` every rank's blob (others get an
//   empty list): results and reports collected to one rank.
// - LocalCluster() is the one-process cluster (rank 0 of 1): Exchange hands
//   the blob back, Barrier returns at once, Fail prints its line and exits.
// - ConnectCluster() joins the ranks the process was started with: under
//   mpirun or srun (and built with MPI) the MPI world, else the local
//   cluster. A build without MPI started as one of several ranks fails with
//   a message that says so. The MPI headers stay inside cluster_mpi.cc.
#ifndef TPUMESH_MESH_CLUSTER_H_
#define TPUMESH_MESH_CLUSTER_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace tpumesh::mesh {

using Bytes = std::vector<std::byte>;

// What one rank sends another: the concatenation of `parts` (gathered as it
// is sent, so large inputs are not copied into one buffer first). The parts
// must stay alive and unchanged until Exchange returns.
struct Outgoing {
  std::vector<std::span<const std::byte>> parts;
  int64_t size() const {
    int64_t n = 0;
    for (const auto& p : parts) n += static_cast<int64_t>(p.size());
    return n;
  }
};

class Cluster {
 public:
  virtual ~Cluster() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this host, this one included (to share the host's cores).
  virtual int ranks_on_host() const { return 1; }
  // "local" or "MPI (Open MPI 4.1.4)": what the ranks talk over.
  virtual std::string transport() const = 0;

  // `to` has size() entries. See the contract above.
  virtual StatusOr<std::vector<Bytes>> Exchange(std::span<const Outgoing> to) = 0;
  virtual Status Barrier() = 0;
  virtual Status CheckFailures() { return OkStatus(); }
  bool fail_fast() const { return fail_fast_; }
  void set_fail_fast(bool on) { fail_fast_ = on; }
  // Prints, tells the others, exits 1 (see the contract).
  [[noreturn]] virtual void Fail(const Status& status) = 0;

  // Records that a failure seen here started on rank `origin` (another
  // rank), so that Fail stays quiet on this one.
  void NoteRemoteFailure(int origin) {
    if (remote_failure_ < 0) remote_failure_ = origin;
  }
  int remote_failure() const { return remote_failure_; }

  // Seconds Exchange and Barrier wait for the other ranks before they fail:
  // TPUMESH_CLUSTER_TIMEOUT (seconds) when set, else 600.
  double timeout() const { return timeout_s_; }
  void set_timeout(double seconds) { timeout_s_ = seconds; }

  // Every rank sends `mine` to every other: all[r] is rank r's.
  StatusOr<std::vector<Bytes>> AllGatherBytes(std::span<const std::byte> mine);
  // Every rank sends `mine` to `root`: on root, all[r] is rank r's; on the
  // others, an empty list.
  StatusOr<std::vector<Bytes>> GatherBytes(std::span<const std::byte> mine, int root);
  // See the contract: OK when every rank's `mine` is OK.
  Status Agree(const Status& mine);

 protected:
  Cluster();
  // The line Fail prints, and whether this rank prints it.
  std::string FailureLine(const Status& status) const;

 private:
  int remote_failure_ = -1;
  bool fail_fast_ = false;
  double timeout_s_;
};

// The one-process cluster (a process-wide instance).
Cluster& LocalCluster();

// See the contract. The cluster lives until the process exits (MPI is
// finalized then, when the last rank is done).
StatusOr<Cluster*> ConnectCluster();

// Whether this build can span processes (built with MPI).
bool ClusterHasMpi();

// The rank count the launcher (mpirun, srun, mpiexec) gave this process,
// from its environment, or 0 when it was not started by one.
int LaunchedRanks();

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_CLUSTER_H_
