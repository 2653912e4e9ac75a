// CollectiveHub: internal to Mesh::Pmap, the rendezvous of one pmap's
// collectives (the API is DeviceContext, collectives.h).
//
// Contract:
// - Collective `seq` starts when every participating device has arrived at
//   it: then every participant's call has been checked against the others
//   (FailedPrecondition naming both devices when they differ), clocks are
//   advanced, and Arrive hands each device every participant's input. A
//   device that returned from the pmap without entering `seq`, or failed
//   before it, fails the others with FailedPrecondition naming it: never a
//   hang.
// - One rank (the cluster has one rank): the devices meet in memory, and
//   the inputs handed out are the devices' own buffers, as before ranks.
// - Several ranks: this rank's devices meet in memory; then Serve(), run by
//   the thread that called Pmap, sends the round (each local device's call,
//   clock and state, and its input bytes to the ranks hosting members of its
//   group) to every other rank with Cluster::Exchange and receives theirs. Every rank then decides the
//   round from the same data in the same way (device-id order), so every
//   rank reports the same error, and inputs of other ranks' devices point
//   into the received bytes. Rounds go on until every device of every rank
//   has returned; each pmap ends with one round of that news, so every rank
//   must run the same pmaps in the same order (checked: the round names its
//   pmap).
// - Each device's input goes only to the ranks that need part of it, and
//   only that part (rank_split.h): for psum and pmean across ranks, each
//   rank gets the range of every input it owns; its devices sum it (in
//   group-index order, from all inputs) and call Reduced; Serve then sends
//   the owned sums to the group's other ranks in a second exchange, and
//   Reduced hands every device the other ranks' sums.
// - Results are computed by DeviceContext from the inputs in group-index
//   order, whichever rank they came from: the same bits as one process.
#ifndef TPUMESH_MESH_COLLECTIVE_HUB_H_
#define TPUMESH_MESH_COLLECTIVE_HUB_H_

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "mesh/cluster.h"
#include "mesh/host_cores.h"
#include "mesh/interconnect.h"
#include "mesh/mesh.h"

namespace tpumesh::mesh {

using AxisNames = std::vector<std::string>;

// What one device asks of one collective; compared across devices.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kPsum;
  AxisNames axes;
  DType dtype = DType::kF32;
  Shape shape;
  int axis = 0;         // all_gather axis, psum_scatter dimension, all_to_all split axis
  int concat_axis = 0;  // all_to_all
  bool tiled = false;
  std::vector<std::pair<int, int>> perm;  // ppermute, in group indices
  const Array* input = nullptr;
  std::byte* output = nullptr;  // the device's output buffer (psum's phases read it)

  std::string Describe() const;  // "psum over ('x','y') of f32[4,8]"
  bool SameAs(const CollectiveCall& o) const;
};

// What a device gets from Arrive, indexed by device id.
struct CollectiveData {
  // Every participant's input: this rank's devices' buffers; for another
  // rank's device, the part of its input sent here (rank_split.h's layout).
  std::vector<const std::byte*> inputs;
  std::vector<std::byte*> outputs;  // this rank's devices' output buffers
  // psum/pmean with groups across ranks: every device of this rank calls
  // Reduced (not Sync) between the reduction and the copies.
  bool two_phase = false;
};

class CollectiveHub {
 public:
  // pmap_index: how many pmaps the mesh ran before this one.
  CollectiveHub(Mesh& mesh, HostCores& host_cores, int pmap_index);

  // Blocks until collective `seq` starts (see the contract) and fills
  // `data`, or fails.
  Status Arrive(int device, int seq, const CollectiveCall& call, CollectiveData* data);
  // Blocks until every device of this rank has called Sync for the `seq`-th
  // collective (a barrier between the phases of one collective).
  void Sync(int device, int seq);
  // psum/pmean in a two_phase round: this device has written its share of
  // its rank's sums into its output. Blocks until the ranks have exchanged
  // their sums; then from_rank[r] points at rank r's owned sums
  // (RankSplit::OwnedElements) for this device's group, or is null (this
  // rank, ranks outside the group). Fails if the exchange failed.
  Status Reduced(int device, int seq, std::vector<const std::byte*>* from_rank);
  // Blocks until every device of this rank has finished reading the
  // `seq`-th inputs.
  void Depart(int device, int seq);
  // The device's pmap body returned after entering `entered` collectives.
  void Finish(int device, int entered, const Status& status);
  // Whether the device's error was caused by another device (not its own).
  bool IsSecondary(int device) const;
  // Blocks until every device of this rank has called HostBarrier `index`
  // times or returned from the pmap (a device that failed or was cancelled
  // holds no one up); a device parked here gives its host core to another.
  // Returns true for exactly one device of each barrier, the first to leave
  // it. Host-side only: no clock advances, nothing is recorded, other ranks
  // take no part (not a collective, and not counted as one).
  bool HostBarrier(int device, int index);
  // With several ranks: carries rounds to the other ranks until every
  // device of every rank has returned (or the cluster failed).
  void Serve();

 private:
  // One device's part in one round, as every rank sees it.
  struct Entry {
    bool arrived = false;
    CollectiveCall call;  // when arrived (input, output unset)
    double clock = 0;     // simulated clock on arrival
    int entered = 0;      // when finished
    Status status;        // when finished
  };
  struct Slot {
    std::vector<const CollectiveCall*> calls;  // this rank's arrivals
    CollectiveCall first;                      // a copy of the first arrival's call
    int first_device = -1;
    int arrived = 0;
    int synced = 0;
    int departed = 0;
    bool ready = false;  // the collective starts
    bool done = false;   // decided: ready, or failed with `error`
    Status error;
    bool caused_elsewhere = false;  // the error is another device's (or rank's) doing
    std::vector<Bytes> received;               // other ranks' rounds (several ranks)
    std::vector<const std::byte*> inputs;      // by device id
    // psum/pmean across ranks (several ranks): the second exchange.
    bool two_phase = false;
    int reduced = 0;        // this rank's devices done with their sums
    bool summed = false;    // the sums have been exchanged
    std::vector<Bytes> sums;  // other ranks' owned sums
    std::map<int, std::vector<const std::byte*>> sums_of;  // group's first device -> by rank
  };
  std::string AbandonReasonLocked(int seq) const;
  void WaitLocked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done);
  // Sets this rank's devices' clocks from the clocks on entry of all.
  void AdvanceClocksLocked(const CollectiveCall& call, const std::vector<double>& entry_clocks);
  // Several ranks: encodes this rank's round, decides a round from all.
  // `inputs`: (device, bytes) of this rank's arrivals, in device order.
  Bytes EncodeRoundLocked(int seq, std::vector<std::pair<int, std::span<const std::byte>>>* inputs) const;
  // Whether some group of `call` has members on more than one rank.
  bool AnyGroupSpansRanks(const CollectiveCall& call) const;
  // The second exchange of a two_phase round (Serve): false if it failed.
  bool ExchangeSumsLocked(std::unique_lock<std::mutex>& lock, int seq);
  Status DecodeRound(int from_rank, int seq, const Bytes& blob, std::vector<Entry>* entries,
                     std::vector<const std::byte*>* inputs) const;
  bool DecideRoundLocked(int seq, const std::vector<Entry>& entries);  // false: every device returned
  void StopLocked(const Status& why);

  Mesh& mesh_;
  HostCores& host_cores_;
  const int pmap_index_;
  const bool ranks_;  // several ranks: rounds go through Serve
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Slot> slots_;
  std::vector<int> finished_;  // collectives entered, -1 while running
  std::vector<Status> finished_status_;
  std::vector<bool> secondary_;
  std::vector<int> barriers_reached_;  // by device: HostBarrier calls made
  std::set<int> barriers_led_;         // HostBarrier indices whose first device out was told so
  Status stopped_;  // Serve gave up: every later arrival fails with this
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_COLLECTIVE_HUB_H_
