// The MPI transport (compiled only with TPUMESH_MPI): point-to-point
// messages on a private duplicate of MPI_COMM_WORLD, waited for by polling
// so that a wait can end on a deadline or on another rank's failure notice
// (sent on a second communicator, received by a receive posted up front).
// The C API only: Open MPI's (deprecated) C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "mesh/byte_pool.h"
#include "mesh/cluster_mpi.h"

namespace tpumesh::mesh::internal {
namespace {

constexpr int kSizesTag = 1;
constexpr int kDataTag = 2;
constexpr int kFailTag = 3;
// Messages of at most 8 MiB: MPI counts are ints, and completed chunks show
// the wait loop that data is moving (it spins then, and naps when not).
constexpr int64_t kChunk = int64_t{8} << 20;
constexpr int kMaxFailMessage = 4096;

std::string MpiError(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, len);
}

// Parts of at least kDirect bytes travel from where they are; smaller ones
// are packed into one message (up to kChunk) so that a blob of many small
// parts (an all_to_all's rows, rank_split.h) is a few messages, not one
// per part.
constexpr int64_t kDirect = int64_t{64} << 10;

// One message of a blob: `size` bytes, either a piece of one large part
// (`first` == `last` - 1, from `offset` in it) or the small parts [first,
// last) packed.
struct Message {
  int64_t size = 0;
  size_t first = 0, last = 0;
  int64_t offset = 0;
  bool packed = false;
};

// The messages a blob of these part sizes travels in. Sender and receiver
// derive the same list from the part sizes; the receiver lays them end to
// end, which is the blob.
std::vector<Message> Messages(const std::vector<int64_t>& part_sizes) {
  std::vector<Message> m;
  Message pack{0, 0, 0, 0, true};
  auto flush = [&](size_t next) {
    if (pack.size > 0) m.push_back(pack);
    pack = Message{0, next, next, 0, true};
  };
  for (size_t i = 0; i < part_sizes.size(); ++i) {
    const int64_t p = part_sizes[i];
    if (p >= kDirect) {
      flush(i + 1);
      for (int64_t off = 0; off < p; off += kChunk) m.push_back({std::min(kChunk, p - off), i, i + 1, off, false});
      continue;
    }
    if (pack.size + p > kChunk) flush(i);
    pack.size += p;
    pack.last = i + 1;
  }
  flush(part_sizes.size());
  return m;
}

class MpiCluster final : public Cluster {
 public:
  Status Init() {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return InternalError("MPI_Init_thread: " + MpiError(rc));
    if (provided < MPI_THREAD_SERIALIZED)
      return FailedPreconditionError("this MPI library does not allow calls from several threads (one at a time)");
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_dup(MPI_COMM_WORLD, &fail_comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(fail_comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm host;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host);
    MPI_Comm_size(host, &on_host_);
    MPI_Comm_free(&host);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    library_ = std::string(version, len);
    if (const size_t cut = library_.find_first_of(",\n"); cut != std::string::npos) library_.resize(cut);
    MPI_Irecv(fail_buf_, kMaxFailMessage, MPI_CHAR, MPI_ANY_SOURCE, kFailTag, fail_comm_, &fail_req_);
    return OkStatus();
  }

  ~MpiCluster() override {
    // Only a clean end gets here (Fail exits without it): every rank is
    // done with the others, so the barrier inside MPI_Finalize returns.
    if (fail_req_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&fail_req_);
      MPI_Request_free(&fail_req_);
    }
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&fail_comm_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int ranks_on_host() const override { return on_host_; }
  std::string transport() const override { return "MPI (" + library_ + ")"; }

  StatusOr<std::vector<Bytes>> Exchange(std::span<const Outgoing> to) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(to.size()) != size_)
      return InternalError("Exchange: " + std::to_string(to.size()) + " blobs for " + std::to_string(size_) + " ranks");
    TPUMESH_RETURN_IF_ERROR(FailedElsewhere());
    std::vector<Bytes> from(size_);
    for (const auto& p : to[rank_].parts) from[rank_].insert(from[rank_].end(), p.begin(), p.end());

    // 1. Part sizes, both ways (a receiver learns how many come by probing).
    std::vector<std::vector<int64_t>> sizes_out(size_), sizes_in(size_);
    std::vector<MPI_Request> reqs;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      for (const auto& p : to[r].parts) sizes_out[r].push_back(static_cast<int64_t>(p.size()));
      reqs.emplace_back();
      int rc = MPI_Isend(sizes_out[r].data(), static_cast<int>(sizes_out[r].size()), MPI_INT64_T, r, kSizesTag,
                         comm_, &reqs.back());
      if (rc != MPI_SUCCESS) return InternalError("MPI_Isend: " + MpiError(rc));
    }
    std::vector<bool> got(size_, false);
    got[rank_] = true;
    TPUMESH_RETURN_IF_ERROR(Wait(reqs, "the sizes of collective data", [&]() -> StatusOr<bool> {
      bool all = true;
      for (int r = 0; r < size_; ++r) {
        if (got[r]) continue;
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(r, kSizesTag, comm_, &flag, &st);
        if (!flag) {
          all = false;
          continue;
        }
        int count = 0;
        MPI_Get_count(&st, MPI_INT64_T, &count);
        sizes_in[r].resize(count);
        MPI_Recv(sizes_in[r].data(), count, MPI_INT64_T, r, kSizesTag, comm_, MPI_STATUS_IGNORE);
        got[r] = true;
      }
      return all;
    }));

    // 2. The data, in the chunks both sides derive from the part sizes.
    reqs.clear();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      int64_t total = 0;
      for (int64_t s : sizes_in[r]) total += s;
      from[r] = TakeBytes(static_cast<size_t>(total));
      int64_t off = 0;
      for (const Message& msg : Messages(sizes_in[r])) {
        reqs.emplace_back();
        int rc = MPI_Irecv(from[r].data() + off, static_cast<int>(msg.size), MPI_BYTE, r, kDataTag, comm_,
                           &reqs.back());
        if (rc != MPI_SUCCESS) return InternalError("MPI_Irecv: " + MpiError(rc));
        off += msg.size;
      }
    }
    std::vector<Bytes> packs;  // small parts gathered for sending, alive until sent
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const auto& parts = to[r].parts;
      for (const Message& msg : Messages(sizes_out[r])) {
        const std::byte* data = parts[msg.first].data() + msg.offset;
        if (msg.packed) {
          Bytes& pack = packs.emplace_back();
          pack.reserve(static_cast<size_t>(msg.size));
          for (size_t i = msg.first; i < msg.last; ++i) pack.insert(pack.end(), parts[i].begin(), parts[i].end());
          data = pack.data();
        }
        reqs.emplace_back();
        int rc = MPI_Isend(data, static_cast<int>(msg.size), MPI_BYTE, r, kDataTag, comm_, &reqs.back());
        if (rc != MPI_SUCCESS) return InternalError("MPI_Isend: " + MpiError(rc));
      }
    }
    TPUMESH_RETURN_IF_ERROR(Wait(reqs, "collective data", [] { return StatusOr<bool>(true); }));
    return from;
  }

  Status Barrier() override {
    std::lock_guard<std::mutex> lock(mu_);
    TPUMESH_RETURN_IF_ERROR(FailedElsewhere());
    std::vector<MPI_Request> reqs(1);
    MPI_Ibarrier(comm_, &reqs[0]);
    return Wait(reqs, "a barrier", [] { return StatusOr<bool>(true); });
  }

  Status CheckFailures() override {
    std::lock_guard<std::mutex> lock(mu_);
    return FailedElsewhere();
  }

  [[noreturn]] void Fail(const Status& status) override {
    // Called with no exchange under way (after a pmap, or from a pmap's
    // Serve between rounds).
    std::unique_lock<std::mutex> lock(mu_);
    if (remote_failure() < 0 && rank_ > 0) {
      // Another rank failing at the same moment (an interrupt to every
      // rank) may be the one to print: lower ranks first.
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500 * std::min(rank_, 4));
      while (FailedElsewhere().ok() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (remote_failure() < 0) {
      const std::string line = FailureLine(status);
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
      std::string note = status.ToString();
      if (note.size() >= kMaxFailMessage) note.resize(kMaxFailMessage - 1);
      std::vector<MPI_Request> reqs;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        reqs.emplace_back();
        MPI_Isend(note.data(), static_cast<int>(note.size()), MPI_CHAR, r, kFailTag, fail_comm_, &reqs.back());
      }
      // Small messages go out eagerly; give them up to 2 s to leave.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      int done = 0;
      while (!done && std::chrono::steady_clock::now() < until) {
        MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } else {
      // Quiet here: let the rank where the failure arose print its line
      // first (its notice comes after the line); mpirun stops every rank
      // as soon as one exits non-zero. At most 10 s, if it never comes.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (FailedElsewhere().ok() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::fflush(stdout);
    // No MPI_Finalize: the other ranks are not all coming to it. mpirun
    // ends the ranks still running when one exits non-zero unfinalized.
    std::_Exit(1);
  }

 private:
  // A failure another rank reported (once seen, every later call fails).
  Status FailedElsewhere() {
    if (!failed_.ok()) return failed_;
    int flag = 0;
    MPI_Status st;
    MPI_Test(&fail_req_, &flag, &st);
    if (!flag) return OkStatus();
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    NoteRemoteFailure(st.MPI_SOURCE);
    failed_ = CancelledError("rank " + std::to_string(st.MPI_SOURCE) + " failed: " + std::string(fail_buf_, len));
    return failed_;
  }

  // Polls until every request in `reqs` is complete and `more` says true,
  // another rank fails, or the timeout passes. Spins while requests
  // complete (data moving: MPI progresses only inside its calls), naps
  // 0.5 ms otherwise (a peer still computing keeps its cores).
  template <typename More>
  Status Wait(std::vector<MPI_Request>& reqs, const char* what, More more) {
    const auto start = std::chrono::steady_clock::now();
    auto last_progress = start;
    std::vector<int> indices(reqs.size());
    int left = static_cast<int>(reqs.size());
    bool extra_done = false;
    while (true) {
      if (left > 0) {
        int n = 0;
        int rc = MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, indices.data(), MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return InternalError(std::string("waiting for ") + what + ": " + MpiError(rc));
        if (n != MPI_UNDEFINED && n > 0) {
          left -= n;
          last_progress = std::chrono::steady_clock::now();
        }
        if (n == MPI_UNDEFINED) left = 0;
      }
      if (!extra_done) {
        TPUMESH_ASSIGN_OR_RETURN(extra_done, more());
      }
      if (left == 0 && extra_done) return OkStatus();
      TPUMESH_RETURN_IF_ERROR(FailedElsewhere());
      const auto now = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(now - start).count() > timeout()) {
        for (auto& r : reqs)
          if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
        return FailedPreconditionError("rank " + std::to_string(rank_) + " waited " +
                                       std::to_string(static_cast<int>(timeout())) + " s for " + what +
                                       " from the other ranks (TPUMESH_CLUSTER_TIMEOUT)");
      }
      if (now - last_progress > std::chrono::milliseconds(2))
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

  std::mutex mu_;  // one MPI call sequence at a time (MPI_THREAD_SERIALIZED)
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm fail_comm_ = MPI_COMM_NULL;
  MPI_Request fail_req_ = MPI_REQUEST_NULL;
  char fail_buf_[kMaxFailMessage];
  Status failed_;
  int rank_ = 0;
  int size_ = 1;
  int on_host_ = 1;
  std::string library_;
};

}  // namespace

bool MpiAvailable() { return true; }

StatusOr<Cluster*> ConnectMpi() {
  static std::mutex mu;
  static std::unique_ptr<MpiCluster> world;  // finalized at exit
  std::lock_guard<std::mutex> lock(mu);
  if (!world) {
    auto c = std::make_unique<MpiCluster>();
    TPUMESH_RETURN_IF_ERROR(c->Init());
    world = std::move(c);
  }
  return world.get();
}

}  // namespace tpumesh::mesh::internal
