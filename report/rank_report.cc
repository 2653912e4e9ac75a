#include "report/rank_report.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tpumesh::report {
namespace {

// A writer and a reader of the wire form: native
// byte order (the ranks of one mesh run one build on one architecture,
// docs/cluster.md), lengths as int64.
class Writer {
 public:
  explicit Writer(mesh::Bytes* out) : out_(out) {}
  template <typename T>
  void Put(const T& v) {
    const size_t at = out_->size();
    out_->resize(at + sizeof(T));
    std::memcpy(out_->data() + at, &v, sizeof(T));
  }
  void Put(const std::string& s) {
    Put<int64_t>(static_cast<int64_t>(s.size()));
    const size_t at = out_->size();
    out_->resize(at + s.size());
    if (!s.empty()) std::memcpy(out_->data() + at, s.data(), s.size());
  }

 private:
  mesh::Bytes* out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool Get(std::string* s) {
    int64_t n = 0;
    if (!Get(&n) || n < 0 || static_cast<uint64_t>(n) > in_.size() - at_) return false;
    s->assign(reinterpret_cast<const char*>(in_.data() + at_), static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return true;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  size_t at_ = 0;
};

void PutRecord(Writer& w, const mesh::OpRecord& r) {
  w.Put(r.name);
  w.Put(r.type);
  w.Put(r.shape);
  w.Put(r.cost.flops);
  w.Put(r.cost.bytes_read);
  w.Put(r.cost.bytes_written);
  w.Put(r.cost.transcendentals);
  w.Put<int64_t>(static_cast<int64_t>(r.mxu.size()));
  for (const mesh::MxuMatmul& m : r.mxu) {
    w.Put(m.m);
    w.Put(m.n);
    w.Put(m.k);
    w.Put(m.count);
    w.Put(m.a_bytes);
    w.Put(m.b_bytes);
    w.Put(m.c_bytes);
  }
  w.Put<int32_t>(static_cast<int32_t>(r.precision));
  w.Put(r.host_seconds);
  w.Put(r.repeat);
  w.Put(r.ici_seconds);
  w.Put(r.ici_bytes);
  w.Put(r.module);
  w.Put(r.attention.count);
  w.Put(r.attention.q_len);
  w.Put(r.attention.kv_len);
  w.Put(r.attention.head_dim);
  w.Put(r.attention.element_bytes);
  w.Put(r.async_id);
  w.Put<int32_t>(r.prefetch ? 1 : 0);
  w.Put<int64_t>(static_cast<int64_t>(r.awaits.size()));
  for (const int64_t id : r.awaits) w.Put(id);
}

bool GetRecord(Reader& in, mesh::OpRecord* r) {
  int64_t mxu = 0;
  if (!(in.Get(&r->name) && in.Get(&r->type) && in.Get(&r->shape) && in.Get(&r->cost.flops) &&
        in.Get(&r->cost.bytes_read) && in.Get(&r->cost.bytes_written) && in.Get(&r->cost.transcendentals) &&
        in.Get(&mxu) && mxu >= 0 && mxu < (int64_t{1} << 32)))
    return false;
  r->mxu.resize(static_cast<size_t>(mxu));
  for (mesh::MxuMatmul& m : r->mxu)
    if (!(in.Get(&m.m) && in.Get(&m.n) && in.Get(&m.k) && in.Get(&m.count) && in.Get(&m.a_bytes) &&
          in.Get(&m.b_bytes) && in.Get(&m.c_bytes)))
      return false;
  int32_t precision = 0;
  if (!in.Get(&precision) || precision < 0 || precision > static_cast<int32_t>(kernels::Precision::kHighest))
    return false;
  r->precision = static_cast<kernels::Precision>(precision);
  int64_t awaits = 0;
  int32_t prefetch = 0;
  if (!(in.Get(&r->host_seconds) && in.Get(&r->repeat) && in.Get(&r->ici_seconds) && in.Get(&r->ici_bytes) &&
        in.Get(&r->module) && in.Get(&r->attention.count) && in.Get(&r->attention.q_len) &&
        in.Get(&r->attention.kv_len) && in.Get(&r->attention.head_dim) && in.Get(&r->attention.element_bytes) &&
        in.Get(&r->async_id) && in.Get(&prefetch) && (prefetch == 0 || prefetch == 1) && in.Get(&awaits) &&
        awaits >= 0 && awaits < (int64_t{1} << 32)))
    return false;
  r->prefetch = prefetch == 1;
  r->awaits.resize(static_cast<size_t>(awaits));
  for (int64_t& id : r->awaits)
    if (!in.Get(&id)) return false;
  return true;
}

}  // namespace

void EncodeRecords(std::span<const TaggedRecords> lists, mesh::Bytes* out) {
  Writer w(out);
  w.Put<int64_t>(static_cast<int64_t>(lists.size()));
  for (const TaggedRecords& l : lists) {
    w.Put(l.tag);
    w.Put(l.value);
    w.Put(l.extra);
    w.Put<int64_t>(static_cast<int64_t>(l.records->size()));
    for (const mesh::OpRecord& r : *l.records) PutRecord(w, r);
  }
}

StatusOr<std::vector<DecodedRecords>> DecodeRecords(std::span<const std::byte> blob, const std::string& from) {
  Reader in(blob);
  auto bad = [&] { return InternalError("a malformed list of op records from " + from); };
  int64_t lists = 0;
  if (!in.Get(&lists) || lists < 0 || static_cast<uint64_t>(lists) > blob.size()) return bad();
  std::vector<DecodedRecords> out(static_cast<size_t>(lists));
  for (DecodedRecords& l : out) {
    int64_t n = 0;
    if (!(in.Get(&l.tag) && in.Get(&l.value) && in.Get(&l.extra) && in.Get(&n)) || n < 0 || static_cast<uint64_t>(n) > blob.size())
      return bad();
    l.records.resize(static_cast<size_t>(n));
    for (mesh::OpRecord& r : l.records)
      if (!GetRecord(in, &r)) return bad();
  }
  if (!in.done()) return bad();
  return out;
}

Status FinishAcrossRanks(mesh::Mesh& mesh, const std::vector<std::vector<mesh::OpRecord>>& records,
                         const std::vector<int64_t>& hbm_peak, double host_seconds, bool keep_ops,
                         RunReport* report) {
  mesh::Cluster& cluster = mesh.cluster();
  const int n = mesh.num_devices();
  if (static_cast<int>(records.size()) != n || static_cast<int>(hbm_peak.size()) != n)
    return InternalError("FinishAcrossRanks: records or HBM peaks not one per device");
  if (cluster.size() == 1) {
    report->Finish(records, keep_ops);
    report->hbm_peak_bytes = hbm_peak;
    report->host_seconds = host_seconds;
    report->host_seconds_per_rank = {host_seconds};
    return OkStatus();
  }
  // Rank 0's own devices stay where they are; the others send theirs, with
  // their host time as a list of no records tagged -1.
  std::vector<TaggedRecords> mine;
  const std::vector<mesh::OpRecord> none;
  mine.push_back({-1, 0, 0, &none});
  std::memcpy(&mine.back().value, &host_seconds, sizeof host_seconds);
  if (cluster.rank() != 0)
    for (int d = mesh.first_local(); d < mesh.first_local() + mesh.num_local(); ++d)
      mine.push_back({d, hbm_peak[d], 0, &records[d]});
  mesh::Bytes blob;
  EncodeRecords(mine, &blob);
  TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::Bytes> all, cluster.GatherBytes(blob, 0));
  if (cluster.rank() != 0) {
    report->Finish(records, keep_ops);
    report->hbm_peak_bytes = hbm_peak;
    report->host_seconds = host_seconds;
    report->host_seconds_per_rank.clear();
    return OkStatus();
  }
  std::vector<std::vector<mesh::OpRecord>> every = records;
  std::vector<int64_t> peaks = hbm_peak;
  report->host_seconds_per_rank.assign(cluster.size(), 0);
  report->host_seconds_per_rank[0] = host_seconds;
  for (int r = 1; r < cluster.size(); ++r) {
    const std::string from = "rank " + std::to_string(r);
    TPUMESH_ASSIGN_OR_RETURN(std::vector<DecodedRecords> lists, DecodeRecords(all[r], from));
    for (DecodedRecords& l : lists) {
      if (l.tag == -1) {
        std::memcpy(&report->host_seconds_per_rank[r], &l.value, sizeof(double));
        continue;
      }
      if (l.tag < 0 || l.tag >= n || mesh.rank_of(static_cast<int>(l.tag)) != r)
        return InternalError("op records from " + from + " for device " + std::to_string(l.tag) + ", not one of its");
      every[l.tag] = std::move(l.records);
      peaks[l.tag] = l.value;
    }
  }
  report->Finish(every, keep_ops);
  report->hbm_peak_bytes = std::move(peaks);
  report->host_seconds = *std::max_element(report->host_seconds_per_rank.begin(), report->host_seconds_per_rank.end());
  return OkStatus();
}

}  // namespace tpumesh::report
