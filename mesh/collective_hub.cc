#include "mesh/collective_hub.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>

#include "mesh/byte_pool.h"
#include "mesh/rank_split.h"

namespace tpumesh::mesh {
namespace {

std::string AxesToString(const AxisNames& axes) {
  std::string s = "(";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) s += ",";
    s += "'" + axes[i] + "'";
  }
  return s + ")";
}

// A round on the wire: native byte order (the ranks of one mesh run the
// same build on hosts of one architecture), fixed-size fields and
// length-prefixed strings.
constexpr uint32_t kRoundMagic = 0x31524d54;  // "TMR1"

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<int32_t>(static_cast<int32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes_.insert(bytes_.end(), p, p + s.size());
  }
  Bytes Take() { return std::move(bytes_); }

 private:
  Bytes bytes_;
};

class Reader {
 public:
  explicit Reader(const Bytes& b) : b_(b) {}
  template <typename T>
  T Get() {
    T v{};
    if (pos_ + sizeof(T) > b_.size()) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string GetString() {
    const int32_t n = Get<int32_t>();
    if (n < 0 || pos_ + n > b_.size()) {
      ok_ = false;
      return "";
    }
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  bool ok() const { return ok_; }
  size_t pos() const { return pos_; }

 private:
  const Bytes& b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void PutCall(Writer& w, const CollectiveCall& c) {
  w.Put<int32_t>(static_cast<int32_t>(c.kind));
  w.Put<int32_t>(static_cast<int32_t>(c.axes.size()));
  for (const auto& a : c.axes) w.PutString(a);
  w.Put<int32_t>(static_cast<int32_t>(c.dtype));
  w.Put<int32_t>(static_cast<int32_t>(c.shape.size()));
  for (int64_t d : c.shape) w.Put<int64_t>(d);
  w.Put<int32_t>(c.axis);
  w.Put<int32_t>(c.concat_axis);
  w.Put<uint8_t>(c.tiled ? 1 : 0);
  w.Put<int32_t>(static_cast<int32_t>(c.perm.size()));
  for (const auto& [a, b] : c.perm) {
    w.Put<int32_t>(a);
    w.Put<int32_t>(b);
  }
}

CollectiveCall GetCall(Reader& r) {
  CollectiveCall c;
  c.kind = static_cast<CollectiveKind>(r.Get<int32_t>());
  const int32_t axes = r.Get<int32_t>();
  for (int32_t i = 0; i < axes && r.ok(); ++i) c.axes.push_back(r.GetString());
  c.dtype = static_cast<DType>(r.Get<int32_t>());
  const int32_t rank = r.Get<int32_t>();
  for (int32_t i = 0; i < rank && r.ok(); ++i) c.shape.push_back(r.Get<int64_t>());
  c.axis = r.Get<int32_t>();
  c.concat_axis = r.Get<int32_t>();
  c.tiled = r.Get<uint8_t>() != 0;
  const int32_t pairs = r.Get<int32_t>();
  for (int32_t i = 0; i < pairs && r.ok(); ++i) {
    const int a = r.Get<int32_t>();
    const int b = r.Get<int32_t>();
    c.perm.emplace_back(a, b);
  }
  return c;
}

// What of `device`'s input rank `to` receives (rank_split.h); nothing for
// an invalid group (validated on arrival; sender and receiver agree anyway).
std::vector<ByteRange> Slices(const Mesh& mesh, int device, const CollectiveCall& call, int to) {
  auto group = mesh.Group(device, call.axes);
  if (!group.ok()) return {};
  const int k = static_cast<int>(std::find(group->begin(), group->end(), device) - group->begin());
  return RankSplit(mesh, call, std::move(group).value()).Slices(k, to);
}

}  // namespace

std::string CollectiveCall::Describe() const {
  std::string s = std::string(CollectiveName(kind)) + " over " + AxesToString(axes) + " of " +
                  std::string(DTypeName(dtype)) + ShapeToString(shape);
  switch (kind) {
    case CollectiveKind::kAllGather:
      s += " (axis=" + std::to_string(axis) + (tiled ? ", tiled)" : ")");
      break;
    case CollectiveKind::kPsumScatter:
      s += " (scatter_dimension=" + std::to_string(axis) + (tiled ? ", tiled)" : ")");
      break;
    case CollectiveKind::kAllToAll:
      s += " (split_axis=" + std::to_string(axis) + ", concat_axis=" +
           std::to_string(concat_axis) + (tiled ? ", tiled)" : ")");
      break;
    case CollectiveKind::kPpermute:
      s += " (" + std::to_string(perm.size()) + " pairs)";
      break;
    default:
      break;
  }
  return s;
}

bool CollectiveCall::SameAs(const CollectiveCall& o) const {
  return kind == o.kind && axes == o.axes && dtype == o.dtype && shape == o.shape &&
         axis == o.axis && concat_axis == o.concat_axis && tiled == o.tiled && perm == o.perm;
}

CollectiveHub::CollectiveHub(Mesh& mesh, HostCores& host_cores, int pmap_index)
    : mesh_(mesh),
      host_cores_(host_cores),
      pmap_index_(pmap_index),
      ranks_(mesh.cluster().size() > 1),
      finished_(mesh.num_devices(), -1),
      finished_status_(mesh.num_devices()),
      secondary_(mesh.num_devices(), false),
      barriers_reached_(mesh.num_devices(), 0) {}

void CollectiveHub::WaitLocked(std::unique_lock<std::mutex>& lock,
                               const std::function<bool()>& done) {
  if (done()) return;
  // Give this device's host core to another device while parked here.
  host_cores_.Release();
  cv_.wait(lock, done);
  lock.unlock();
  host_cores_.Acquire();
  lock.lock();
}

std::string CollectiveHub::AbandonReasonLocked(int seq) const {
  for (size_t f = 0; f < finished_.size(); ++f) {
    if (finished_[f] < 0 || finished_[f] > seq) continue;
    std::string what = "collective #" + std::to_string(seq);
    auto it = slots_.find(seq);
    if (it != slots_.end() && it->second.first_device >= 0) {
      what += " (" + it->second.first.Describe() + ") that device " +
              std::to_string(it->second.first_device) + " entered";
    }
    if (finished_status_[f].ok()) {
      return "device " + std::to_string(f) + " returned from the pmapped function without entering " + what;
    }
    return "device " + std::to_string(f) + " failed before entering " + what + ": " +
           finished_status_[f].ToString();
  }
  return "";
}

void CollectiveHub::AdvanceClocksLocked(const CollectiveCall& call, const std::vector<double>& entry_clocks) {
  const int n = mesh_.num_devices();
  std::map<int, std::pair<double, int64_t>> by_group;  // first member -> (end time, bytes)
  for (int d = 0; d < n; ++d) {
    if (!mesh_.is_local(d)) continue;
    auto group = mesh_.Group(d, call.axes);
    if (!group.ok()) continue;  // validated before arrival
    const int key = group->front();
    auto it = by_group.find(key);
    if (it == by_group.end()) {
      double start = 0;
      for (int m : *group) start = std::max(start, entry_clocks[m]);
      std::vector<std::pair<int, int>> pairs;
      for (const auto& [s, t] : call.perm) pairs.emplace_back((*group)[s], (*group)[t]);
      const int64_t bytes = NumElements(call.shape) * static_cast<int64_t>(DTypeSize(call.dtype));
      CollectiveCost cost = ModelCollective(mesh_.chip(), mesh_.topology(), call.kind, *group,
                                            bytes, pairs);
      it = by_group.emplace(key, std::make_pair(start + cost.seconds, cost.bytes_sent_per_device))
               .first;
    }
    mesh_.device(d).SetClock(it->second.first);
    mesh_.device(d).AddIciBytes(it->second.second);
  }
}

Status CollectiveHub::Arrive(int device, int seq, const CollectiveCall& call, CollectiveData* data) {
  std::unique_lock<std::mutex> lock(mu_);
  const int n = mesh_.num_devices();
  if (!stopped_.ok()) {
    secondary_[device] = true;
    return stopped_;
  }
  Slot& s = slots_[seq];
  if (s.calls.empty()) s.calls.resize(n, nullptr);
  if (s.first_device < 0) {
    s.first = call;
    s.first.input = nullptr;
    s.first_device = device;
  } else if (!ranks_ && s.error.ok() && !s.first.SameAs(call)) {
    s.error = FailedPreconditionError(
        "collective #" + std::to_string(seq) + " does not match across devices: device " +
        std::to_string(s.first_device) + " calls " + s.first.Describe() + " but device " +
        std::to_string(device) + " calls " + call.Describe());
  }
  s.calls[device] = &call;
  ++s.arrived;
  if (ranks_) {
    // Serve decides the round with the other ranks.
    cv_.notify_all();
    WaitLocked(lock, [&] { return s.done; });
    if (!s.ready) {
      if (s.caused_elsewhere) secondary_[device] = true;
      return s.error;
    }
  } else {
    if (s.arrived == mesh_.num_local()) {
      s.ready = true;
      if (s.error.ok()) {
        std::vector<double> clocks(n);
        for (int d = 0; d < n; ++d) clocks[d] = mesh_.device(d).clock_seconds();
        AdvanceClocksLocked(s.first, clocks);
      }
      cv_.notify_all();
    } else {
      WaitLocked(lock, [&] { return s.ready || !AbandonReasonLocked(seq).empty(); });
    }
    if (!s.ready) {
      secondary_[device] = true;
      return FailedPreconditionError(AbandonReasonLocked(seq));
    }
    if (!s.error.ok()) return s.error;
  }
  data->inputs.assign(n, nullptr);
  data->outputs.assign(n, nullptr);
  data->two_phase = s.two_phase;
  for (int d = 0; d < n; ++d) {
    if (mesh_.is_local(d)) {
      data->inputs[d] = static_cast<const std::byte*>(s.calls[d]->input->raw());
      data->outputs[d] = s.calls[d]->output;
    } else {
      data->inputs[d] = s.inputs[d];
    }
  }
  return OkStatus();
}

void CollectiveHub::Sync(int device, int seq) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_[seq];
  const int n = mesh_.num_local();
  if (++s.synced == n) {
    cv_.notify_all();
    return;
  }
  WaitLocked(lock, [&] { return s.synced == n; });
}

Status CollectiveHub::Reduced(int device, int seq, std::vector<const std::byte*>* from_rank) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_[seq];
  ++s.reduced;
  cv_.notify_all();  // Serve waits for every device's sums
  WaitLocked(lock, [&] { return s.summed || !stopped_.ok(); });
  if (!s.summed) {
    secondary_[device] = true;
    return stopped_;
  }
  from_rank->assign(mesh_.cluster().size(), nullptr);
  auto group = mesh_.Group(device, s.first.axes);
  if (!group.ok()) return group.status();
  if (auto it = s.sums_of.find(group->front()); it != s.sums_of.end()) *from_rank = it->second;
  return OkStatus();
}

void CollectiveHub::Depart(int device, int seq) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = slots_[seq];
  const int n = mesh_.num_local();
  if (++s.departed == n) {
    // Nobody reads this collective's inputs any more: other ranks' bytes go
    // back to the pool for the next collective.
    GiveBytes(std::move(s.received));
    GiveBytes(std::move(s.sums));
    cv_.notify_all();
    return;
  }
  WaitLocked(lock, [&] { return s.departed == n; });
}

void CollectiveHub::Finish(int device, int entered, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_[device] = entered;
  finished_status_[device] = status;
  cv_.notify_all();
}

bool CollectiveHub::HostBarrier(int device, int index) {
  std::unique_lock<std::mutex> lock(mu_);
  barriers_reached_[device] = index;
  cv_.notify_all();
  const int begin = mesh_.first_local(), end = begin + mesh_.num_local();
  WaitLocked(lock, [&] {
    int in = 0;
    for (int d = begin; d < end; ++d) in += barriers_reached_[d] >= index || finished_[d] >= 0;
    return in == end - begin;
  });
  return barriers_led_.insert(index).second;
}

bool CollectiveHub::IsSecondary(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  return secondary_[device];
}

// ---------------------------------------------------------------------------
// Rounds between ranks

bool CollectiveHub::AnyGroupSpansRanks(const CollectiveCall& call) const {
  for (int d = 0; d < mesh_.num_devices(); ++d) {
    auto group = mesh_.Group(d, call.axes);
    if (!group.ok()) return false;
    for (int m : *group)
      if (mesh_.rank_of(m) != mesh_.rank_of(d)) return true;
  }
  return false;
}

Bytes CollectiveHub::EncodeRoundLocked(int seq,
                                       std::vector<std::pair<int, std::span<const std::byte>>>* inputs) const {
  const Slot& s = slots_.at(seq);
  Writer w;
  w.Put<uint32_t>(kRoundMagic);
  w.Put<int32_t>(pmap_index_);
  w.Put<int32_t>(seq);
  w.Put<int32_t>(mesh_.first_local());
  w.Put<int32_t>(mesh_.num_local());
  for (int d = mesh_.first_local(); d < mesh_.first_local() + mesh_.num_local(); ++d) {
    const CollectiveCall* c = s.calls[d];
    w.Put<uint8_t>(c != nullptr ? 1 : 0);
    w.Put<double>(mesh_.device(d).clock_seconds());
    if (c != nullptr) {
      PutCall(w, *c);
      const int64_t bytes = c->input->size_bytes();
      w.Put<int64_t>(bytes);
      inputs->emplace_back(d, std::span<const std::byte>(static_cast<const std::byte*>(c->input->raw()),
                                                         static_cast<size_t>(bytes)));
    } else {
      w.Put<int32_t>(finished_[d]);
      w.Put<int32_t>(static_cast<int32_t>(finished_status_[d].code()));
      w.PutString(finished_status_[d].message());
    }
  }
  return w.Take();
}

Status CollectiveHub::DecodeRound(int from_rank, int seq, const Bytes& blob, std::vector<Entry>* entries,
                                  std::vector<const std::byte*>* inputs) const {
  Reader r(blob);
  const std::string who = "rank " + std::to_string(from_rank);
  if (r.Get<uint32_t>() != kRoundMagic) return InternalError(who + " sent something that is not a collective round");
  const int pmap = r.Get<int32_t>();
  const int round = r.Get<int32_t>();
  if (pmap != pmap_index_ || round != seq) {
    return FailedPreconditionError(
        "ranks out of step: " + who + " is at pmap #" + std::to_string(pmap) + ", collective #" +
        std::to_string(round) + " but rank " + std::to_string(mesh_.cluster().rank()) + " at pmap #" +
        std::to_string(pmap_index_) + ", collective #" + std::to_string(seq) +
        " (every rank must run the same pmaps in the same order)");
  }
  const int first = r.Get<int32_t>();
  const int count = r.Get<int32_t>();
  if (first != from_rank * mesh_.num_local() || count != mesh_.num_local())
    return FailedPreconditionError(who + " hosts devices " + std::to_string(first) + ".." +
                                   std::to_string(first + count - 1) + ", not the block this rank expects: "
                                   "every rank must build the same mesh");
  std::vector<int64_t> sizes;
  std::vector<int> arrived;
  for (int d = first; d < first + count && r.ok(); ++d) {
    Entry& e = (*entries)[d];
    e.arrived = r.Get<uint8_t>() != 0;
    e.clock = r.Get<double>();
    if (e.arrived) {
      e.call = GetCall(r);
      sizes.push_back(r.Get<int64_t>());
      arrived.push_back(d);
      if (sizes.back() != NumElements(e.call.shape) * static_cast<int64_t>(DTypeSize(e.call.dtype)))
        return InternalError(who + ": device " + std::to_string(d) + " sent the wrong byte count for " +
                             e.call.Describe());
    } else {
      e.entered = r.Get<int32_t>();
      const auto code = static_cast<StatusCode>(r.Get<int32_t>());
      e.status = Status(code, r.GetString());
    }
  }
  if (!r.ok()) return InternalError(who + " sent a truncated collective round");
  if (inputs == nullptr) return OkStatus();  // this rank's own: inputs are at hand
  // Each arrival's part for this rank, in device order (rank_split.h).
  size_t off = r.pos();
  for (size_t i = 0; i < arrived.size(); ++i) {
    int64_t bytes = 0;
    for (const ByteRange& b : Slices(mesh_, arrived[i], (*entries)[arrived[i]].call, mesh_.cluster().rank()))
      bytes += b.size;
    if (bytes == 0) continue;  // nothing sent here
    if (off + bytes > blob.size()) return InternalError(who + " sent less input data than it announced");
    (*inputs)[arrived[i]] = blob.data() + off;
    off += bytes;
  }
  if (off != blob.size()) return InternalError(who + " sent more input data than it announced");
  return OkStatus();
}

void CollectiveHub::StopLocked(const Status& why) {
  stopped_ = why;
  for (auto& [seq, s] : slots_) {
    if (s.done) continue;
    s.done = true;
    s.error = why;
    s.caused_elsewhere = true;
  }
  cv_.notify_all();
}

bool CollectiveHub::DecideRoundLocked(int seq, const std::vector<Entry>& entries) {
  Slot& s = slots_[seq];
  const int n = mesh_.num_devices();
  auto where = [&](int d) {
    return "device " + std::to_string(d) + " (rank " + std::to_string(mesh_.rank_of(d)) + ")";
  };
  int first_arrived = -1, first_finished = -1;
  for (int d = 0; d < n; ++d) {
    if (entries[d].arrived) {
      if (first_arrived < 0) first_arrived = d;
    } else if (first_finished < 0) {
      first_finished = d;
    }
  }
  s.done = true;
  if (first_arrived < 0) {  // every device of every rank returned
    s.error = FailedPreconditionError("the pmap is over");
    cv_.notify_all();
    return false;
  }
  if (first_finished >= 0) {
    const Entry& f = entries[first_finished];
    const std::string what = "collective #" + std::to_string(seq) + " (" + entries[first_arrived].call.Describe() +
                             ") that " + where(first_arrived) + " entered";
    s.error = FailedPreconditionError(
        f.status.ok() ? where(first_finished) + " returned from the pmapped function without entering " + what
                      : where(first_finished) + " failed before entering " + what + ": " + f.status.ToString());
    s.caused_elsewhere = true;
    if (!mesh_.is_local(first_finished)) mesh_.cluster().NoteRemoteFailure(mesh_.rank_of(first_finished));
    cv_.notify_all();
    return true;
  }
  const CollectiveCall& call = entries[first_arrived].call;
  for (int d = first_arrived + 1; d < n; ++d) {
    if (entries[d].call.SameAs(call)) continue;
    s.error = FailedPreconditionError("collective #" + std::to_string(seq) + " does not match across devices: " +
                                      where(first_arrived) + " calls " + call.Describe() + " but " + where(d) +
                                      " calls " + entries[d].call.Describe());
    if (!mesh_.is_local(d)) mesh_.cluster().NoteRemoteFailure(mesh_.rank_of(d));
    cv_.notify_all();
    return true;
  }
  std::vector<double> clocks(n);
  for (int d = 0; d < n; ++d) clocks[d] = entries[d].clock;
  AdvanceClocksLocked(call, clocks);
  s.error = OkStatus();
  s.two_phase = (call.kind == CollectiveKind::kPsum || call.kind == CollectiveKind::kPmean) &&
                AnyGroupSpansRanks(call);
  s.ready = true;
  cv_.notify_all();
  return true;
}

void CollectiveHub::Serve() {
  Cluster& cluster = mesh_.cluster();
  const int n = mesh_.num_devices();
  const int begin = mesh_.first_local(), end = begin + mesh_.num_local();
  for (int seq = 0;; ++seq) {
    std::unique_lock<std::mutex> lock(mu_);
    Slot& s = slots_[seq];
    if (s.calls.empty()) s.calls.resize(n, nullptr);
    // This thread holds no host core: it waits without giving one back.
    // With fail_fast, a device of this rank failing on its own, or another
    // rank's failure notice, ends the job now (Cluster::Fail): the other
    // ranks' devices may compute for a long time before the next round.
    const auto round_ready = [&] {
      for (int d = begin; d < end; ++d)
        if (s.calls[d] == nullptr && finished_[d] < 0) return false;
      return true;
    };
    while (true) {
      if (!cluster.fail_fast()) {
        cv_.wait(lock, round_ready);
        break;
      }
      const bool ready = cv_.wait_for(lock, std::chrono::milliseconds(100), round_ready);
      for (int d = begin; d < end; ++d) {
        if (finished_[d] < 0 || finished_status_[d].ok() || secondary_[d]) continue;
        const Status failed = finished_status_[d].WithContext("pmap: device " + std::to_string(d));
        lock.unlock();
        cluster.Fail(failed);
      }
      if (ready) break;
      lock.unlock();
      Status elsewhere = cluster.CheckFailures();
      if (!elsewhere.ok()) cluster.Fail(elsewhere);
      lock.lock();
    }
    std::vector<std::pair<int, std::span<const std::byte>>> inputs;
    const Bytes header = EncodeRoundLocked(seq, &inputs);
    // Every rank gets the header; a device's input goes only to the ranks
    // that need part of it, and only that part (rank_split.h: a `model`
    // group inside this rank sends nothing). This rank's own inputs are
    // read in place.
    std::vector<Outgoing> out(cluster.size());
    for (int r = 0; r < cluster.size(); ++r) {
      out[r].parts.push_back(header);
      if (r == cluster.rank()) continue;
      for (const auto& [d, bytes] : inputs)
        for (const ByteRange& b : Slices(mesh_, d, *s.calls[d], r))
          out[r].parts.push_back(bytes.subspan(static_cast<size_t>(b.offset), static_cast<size_t>(b.size)));
    }
    lock.unlock();
    StatusOr<std::vector<Bytes>> from = cluster.Exchange(out);

    lock.lock();
    if (!from.ok()) {
      StopLocked(from.status());
      return;
    }
    s.received = std::move(from).value();
    std::vector<Entry> entries(n);
    std::vector<const std::byte*> remote_inputs(n, nullptr);
    for (int r = 0; r < cluster.size(); ++r) {
      Status st = DecodeRound(r, seq, s.received[r], &entries, r == cluster.rank() ? nullptr : &remote_inputs);
      if (!st.ok()) {
        StopLocked(st);
        return;
      }
    }
    s.inputs = std::move(remote_inputs);
    if (!DecideRoundLocked(seq, entries)) {
      GiveBytes(std::move(s.received));  // the pmap's last round: nobody reads it
      return;
    }
    if (s.ready && s.two_phase && !ExchangeSumsLocked(lock, seq)) return;
  }
}

bool CollectiveHub::ExchangeSumsLocked(std::unique_lock<std::mutex>& lock, int seq) {
  Cluster& cluster = mesh_.cluster();
  const int me = cluster.rank();
  Slot& s = slots_[seq];
  const CollectiveCall& call = s.first;  // the round is decided: every call is the same
  const size_t elem = DTypeSize(call.dtype);
  // Every device of this rank takes part; each has written its share of the
  // owned range into its output when it calls Reduced.
  cv_.wait(lock, [&] { return s.reduced == mesh_.num_local(); });

  // The groups of rank `from` that span ranks, each once (by its first
  // member on `from`, in device order): both sides list them alike.
  auto groups_of = [&](int from, auto&& each) {
    const int per = mesh_.num_devices() / cluster.size();
    for (int d = from * per; d < (from + 1) * per; ++d) {
      auto group = mesh_.Group(d, call.axes);
      if (!group.ok()) continue;
      RankSplit split(mesh_, call, std::move(group).value());
      if (!split.spans_ranks()) continue;
      const std::vector<int> mine = split.MembersOn(from);
      if (split.group()[mine.front()] != d) continue;
      each(split, mine);
    }
  };
  // To each other rank of a group: this rank's owned sums, the pieces its
  // devices reduced (in group order, so they concatenate to the range).
  std::vector<Outgoing> out(cluster.size());
  groups_of(me, [&](const RankSplit& split, const std::vector<int>& mine) {
    const auto [begin, end] = split.OwnedElements(me);
    const int m = static_cast<int>(mine.size());
    for (int r : split.ranks()) {
      if (r == me) continue;
      for (int j = 0; j < m; ++j) {
        const int64_t b = begin + (end - begin) * j / m, e = begin + (end - begin) * (j + 1) / m;
        out[r].parts.emplace_back(s.calls[split.group()[mine[j]]]->output + b * elem, static_cast<size_t>((e - b) * elem));
      }
    }
  });
  lock.unlock();
  StatusOr<std::vector<Bytes>> from = cluster.Exchange(out);
  lock.lock();
  if (!from.ok()) {
    StopLocked(from.status());
    return false;
  }
  s.sums = std::move(from).value();
  for (int r = 0; r < cluster.size(); ++r) {
    if (r == me) continue;
    size_t off = 0;
    groups_of(r, [&](const RankSplit& split, const std::vector<int>&) {
      if (split.MembersOn(me).empty()) return;
      const auto [begin, end] = split.OwnedElements(r);
      auto& by_rank = s.sums_of[split.group().front()];
      by_rank.resize(cluster.size(), nullptr);
      by_rank[r] = s.sums[r].data() + off;
      off += static_cast<size_t>(end - begin) * elem;
    });
    if (off != s.sums[r].size()) {
      StopLocked(InternalError("rank " + std::to_string(r) + " sent " + std::to_string(s.sums[r].size()) +
                               " bytes of sums, not the " + std::to_string(off) + " expected"));
      return false;
    }
  }
  s.summed = true;
  cv_.notify_all();
  return true;
}

}  // namespace tpumesh::mesh
