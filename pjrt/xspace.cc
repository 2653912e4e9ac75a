#include "pjrt/xspace.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpumesh::pjrt {
namespace {

// A protobuf wire writer: appends fields to one message's bytes. Nested
// messages are written into their own Writer and added as bytes.
class Writer {
 public:
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  void Tag(int field, int wire_type) {
    Varint((static_cast<uint64_t>(field) << 3) |
           static_cast<uint64_t>(wire_type));
  }
  // int64 (and uint64) as varint; a negative int64 takes 10 bytes, as protobuf
  // writes it.
  void Int(int field, int64_t v) {
    Tag(field, 0);
    Varint(static_cast<uint64_t>(v));
  }
  void Double(int field, double v) {
    Tag(field, 1);
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int k = 0; k < 8; ++k)
      out_ += static_cast<char>((bits >> (8 * k)) & 0xff);
  }
  void Bytes(int field, std::string_view s) {
    Tag(field, 2);
    Varint(s.size());
    out_.append(s.data(), s.size());
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// XLine's fields.
constexpr int kLineId = 1, kLineName = 2, kLineTimestampNs = 3, kLineEvents = 4,
              kLineDurationPs = 9;
// XEvent's.
constexpr int kEventMetadataId = 1, kEventOffsetPs = 2, kEventDurationPs = 3,
              kEventStats = 4;
// XStat's.
constexpr int kStatMetadataId = 1, kStatDouble = 2, kStatInt64 = 4,
              kStatString = 5;
// XPlane's.
constexpr int kPlaneId = 1, kPlaneName = 2, kPlaneLines = 3,
              kPlaneEventMetadata = 4, kPlaneStatMetadata = 5, kPlaneStats = 6;

// One device's plane as it is built: its lines' events so far and the
// metadata they name.
class PlaneBuilder {
 public:
  enum LineIndex { kModules = 0, kOps = 1, kHost = 2 };

  explicit PlaneBuilder(int64_t device_id) : device_id_(device_id) {
    lines_[kModules].name = "XLA Modules (modelled)";
    lines_[kOps].name = "XLA Ops (modelled)";
    lines_[kHost].name = "Host wall time (measured)";
  }

  int64_t EventId(const std::string& name) {
    auto [it, added] = event_ids_.try_emplace(
        name, static_cast<int64_t>(event_ids_.size()) + 1);
    return it->second;
  }
  int64_t StatId(const std::string& name) {
    auto [it, added] =
        stat_ids_.try_emplace(name, static_cast<int64_t>(stat_ids_.size()) + 1);
    return it->second;
  }

  class Stats {
   public:
    // Written as repeated field `field`: an event's stats (4) or a plane's (6).
    explicit Stats(PlaneBuilder& p, int field = kEventStats)
        : p_(p), field_(field) {}
    Stats& Double(const std::string& name, double v) {
      Writer s;
      s.Int(kStatMetadataId, p_.StatId(name));
      s.Double(kStatDouble, v);
      w_.Bytes(field_, s.str());
      return *this;
    }
    Stats& Int(const std::string& name, int64_t v) {
      Writer s;
      s.Int(kStatMetadataId, p_.StatId(name));
      s.Int(kStatInt64, v);
      w_.Bytes(field_, s.str());
      return *this;
    }
    Stats& String(const std::string& name, std::string_view v) {
      Writer s;
      s.Int(kStatMetadataId, p_.StatId(name));
      s.Bytes(kStatString, v);
      w_.Bytes(field_, s.str());
      return *this;
    }
    const std::string& bytes() const { return w_.str(); }

   private:
    PlaneBuilder& p_;
    int field_;
    Writer w_;
  };

  // The line's origin: set by its first event (events come in time order
  // per line).
  int64_t& Origin(LineIndex line, int64_t first_ns) {
    Line& l = lines_[line];
    if (l.timestamp_ns < 0) l.timestamp_ns = first_ns;
    return l.timestamp_ns;
  }

  void AddEvent(LineIndex line, const std::string& name, int64_t offset_ps,
                int64_t duration_ps, const Stats& stats) {
    Writer e;
    e.Int(kEventMetadataId, EventId(name));
    e.Int(kEventOffsetPs, offset_ps);
    e.Int(kEventDurationPs, duration_ps);
    const std::string& s = stats.bytes();
    Line& l = lines_[line];
    l.events.Bytes(kLineEvents,
                   e.str() + s);  // the stats are repeated field 4 of the event
    l.end_ps = std::max(l.end_ps, offset_ps + duration_ps);
  }

  // The modelled timeline: when the device is free again, ps after the
  // modelled lines' origin.
  int64_t& busy_until_ps() { return busy_until_ps_; }

  std::string Serialize(const std::string& chip) {
    Writer p;
    p.Int(kPlaneId, device_id_);
    p.Bytes(kPlaneName, "/device:TPU:" + std::to_string(device_id_));
    for (int k = 0; k < 3; ++k) {
      const Line& l = lines_[k];
      if (l.timestamp_ns < 0) continue;
      Writer w;
      w.Int(kLineId, k + 1);
      w.Bytes(kLineName, l.name);
      w.Int(kLineTimestampNs, l.timestamp_ns);
      w.Int(kLineDurationPs, l.end_ps);
      p.Bytes(kPlaneLines, w.str() + l.events.str());
    }
    // Plane stats first, so their names are in the stat metadata below.
    Stats plane_stats(*this, kPlaneStats);
    plane_stats.String("tpumesh",
                       "an emulated TPU device: the lines marked (modelled) "
                       "are tpumesh's cost model of the chip; "
                       "'Host wall time (measured)' is this host's wall clock");
    plane_stats.String("chip", chip);
    plane_stats.Int("device_id", device_id_);
    // Both metadata maps: map<int64, {id, name}> entries.
    for (const auto& [field, ids] : {std::pair{kPlaneEventMetadata, &event_ids_}, std::pair{kPlaneStatMetadata, &stat_ids_}})
      for (const auto& [name, id] : *ids) {
        Writer m;
        m.Int(1, id);
        m.Bytes(2, name);
        Writer entry;
        entry.Int(1, id);
        entry.Bytes(2, m.str());
        p.Bytes(field, entry.str());
      }
    return p.str() + plane_stats.bytes();
  }

 private:
  struct Line {
    std::string name;
    int64_t timestamp_ns = -1;
    int64_t end_ps = 0;
    Writer events;
  };
  int64_t device_id_;
  Line lines_[3];
  std::map<std::string, int64_t> event_ids_, stat_ids_;
  int64_t busy_until_ps_ = 0;
};

}  // namespace

int64_t Picoseconds(double seconds) {
  return static_cast<int64_t>(std::llround(seconds * 1e12));
}

std::string SerializeXSpace(const std::vector<ProfiledExecution>& executions) {
  std::map<int64_t, PlaneBuilder> planes;
  std::string chip;
  // In the order the host launched them (executions on several threads are
  // recorded in the order they finished), so each line's origin is its
  // earliest event and no offset is negative.
  std::vector<const ProfiledExecution*> order;
  for (const ProfiledExecution& x : executions) order.push_back(&x);
  std::stable_sort(order.begin(), order.end(),
                   [](const ProfiledExecution* a, const ProfiledExecution* b) {
                     return a->host_start_ns < b->host_start_ns;
                   });
  for (const ProfiledExecution* xp : order) {
    const ProfiledExecution& x = *xp;
    if (!x.report) continue;
    const report::RunReport& r = *x.report;
    chip = r.chip.name;
    for (size_t d = 0; d < r.logs.size() && d < x.device_ids.size(); ++d) {
      const int64_t id = x.device_ids[d];
      PlaneBuilder& p = planes.try_emplace(id, id).first->second;
      const mesh::DeviceCostLog& log = r.logs[d];
      // The modelled lines share one origin: the first execution's launch.
      const int64_t origin = p.Origin(PlaneBuilder::kOps, x.host_start_ns);
      p.Origin(PlaneBuilder::kModules, origin);
      const int64_t anchor =
          std::max((x.host_start_ns - origin) * 1000, p.busy_until_ps());
      const int64_t total = Picoseconds(log.seconds());
      p.busy_until_ps() = anchor + total;
      PlaneBuilder::Stats module(p);
      module.Double("modelled_us", log.seconds() * 1e6)
          .Double("host_us",
                  static_cast<double>(x.host_end_ns - x.host_start_ns) / 1e3)
          .Int("devices", static_cast<int64_t>(r.logs.size()));
      p.AddEvent(PlaneBuilder::kModules, x.program, anchor, total, module);
      for (const auto& e : log.ops()) {
        PlaneBuilder::Stats s(p);
        s.String("op type", e.op.type)
            .String("shape", e.op.shape)
            .String("program", x.program)
            .Double("flops", e.op.cost.flops)
            .Double("bytes accessed", e.op.cost.bytes())
            .Double("utilisation", e.timing.utilisation)
            .Double("modelled_start_us", e.start_seconds * 1e6)
            .Double("modelled_us", e.timing.seconds * e.op.repeat * 1e6);
        if (e.op.repeat != 1) s.Double("calls", e.op.repeat);
        if (e.op.host_seconds > 0) s.Double("host_us", e.op.host_seconds * 1e6);
        if (e.op.ici_bytes > 0) s.Int("ici_bytes", e.op.ici_bytes);
        p.AddEvent(PlaneBuilder::kOps, e.op.name,
                   anchor + Picoseconds(e.start_seconds),
                   Picoseconds(e.timing.seconds * e.op.repeat), s);
      }
      const int64_t host_origin =
          p.Origin(PlaneBuilder::kHost, x.host_start_ns);
      PlaneBuilder::Stats host(p);
      host.Double("modelled_us", log.seconds() * 1e6);
      p.AddEvent(PlaneBuilder::kHost, x.program,
                 (x.host_start_ns - host_origin) * 1000,
                 (x.host_end_ns - x.host_start_ns) * 1000, host);
    }
  }
  Writer space;
  for (auto& [id, p] : planes) space.Bytes(1, p.Serialize(chip));
  return space.str();
}

}  // namespace tpumesh::pjrt
