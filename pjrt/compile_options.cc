#include "pjrt/compile_options.h"

#include <functional>
#include <string>

namespace tpumesh::pjrt {
namespace {

// A reader over one message's bytes.
class Wire {
 public:
  explicit Wire(std::string_view b) : b_(b) {}
  bool done() const { return i_ >= b_.size(); }

  StatusOr<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (i_ >= b_.size()) return Bad("a varint past the end");
      const auto c = static_cast<uint8_t>(b_[i_++]);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (c < 0x80) return v;
    }
    return Bad("a varint of more than 10 bytes");
  }

  // Calls on(field, wire_type, varint value, length-delimited bytes) for
  // each field; fixed32/64 are skipped.
  Status Each(const std::function<Status(uint32_t, int, uint64_t, std::string_view)>& on) {
    while (!done()) {
      TPUMESH_ASSIGN_OR_RETURN(const uint64_t key, Varint());
      const auto field = static_cast<uint32_t>(key >> 3);
      const int type = static_cast<int>(key & 7);
      uint64_t value = 0;
      std::string_view bytes;
      switch (type) {
        case 0: {
          TPUMESH_ASSIGN_OR_RETURN(value, Varint());
          break;
        }
        case 1:
        case 5: {
          const size_t n = type == 1 ? 8 : 4;
          if (b_.size() - i_ < n) return Bad("a fixed field past the end").status();
          i_ += n;
          continue;
        }
        case 2: {
          TPUMESH_ASSIGN_OR_RETURN(const uint64_t n, Varint());
          if (n > b_.size() - i_) return Bad("a length past the end").status();
          bytes = b_.substr(i_, n);
          i_ += n;
          break;
        }
        default:
          return Bad("wire type " + std::to_string(type)).status();
      }
      TPUMESH_RETURN_IF_ERROR(on(field, type, value, bytes));
    }
    return OkStatus();
  }

 private:
  static StatusOr<uint64_t> Bad(const std::string& what) {
    return InvalidArgumentError("tpumesh: the compile options are not a CompileOptionsProto: " + what);
  }
  std::string_view b_;
  size_t i_ = 0;
};

Status ReadDeviceIds(std::string_view bytes, std::vector<int64_t>& ids) {
  return Wire(bytes).Each([&](uint32_t field, int type, uint64_t v, std::string_view b) -> Status {
    if (field != 1) return OkStatus();
    if (type == 0) {
      ids.push_back(static_cast<int64_t>(v));
    } else if (type == 2) {  // packed
      Wire packed(b);
      while (!packed.done()) {
        TPUMESH_ASSIGN_OR_RETURN(const uint64_t id, packed.Varint());
        ids.push_back(static_cast<int64_t>(id));
      }
    }
    return OkStatus();
  });
}

}  // namespace

StatusOr<CompileOptions> ParseCompileOptions(std::string_view bytes) {
  CompileOptions o;
  int64_t replica_count = 0;
  std::vector<std::vector<int64_t>> by_computation;  // [partition][replica]
  auto device_assignment = [&](std::string_view b) {
    return Wire(b).Each([&](uint32_t field, int type, uint64_t v, std::string_view sub) -> Status {
      if (field == 1 && type == 0) replica_count = static_cast<int64_t>(v);
      if (field == 3 && type == 2) {
        by_computation.emplace_back();
        TPUMESH_RETURN_IF_ERROR(ReadDeviceIds(sub, by_computation.back()));
      }
      return OkStatus();
    });
  };
  auto build_options = [&](std::string_view b) {
    return Wire(b).Each([&](uint32_t field, int type, uint64_t v, std::string_view sub) -> Status {
      if (field == 4 && type == 0) o.num_replicas = static_cast<int64_t>(v);
      if (field == 5 && type == 0) o.num_partitions = static_cast<int64_t>(v);
      if (field == 9 && type == 2) return device_assignment(sub);
      return OkStatus();
    });
  };
  TPUMESH_RETURN_IF_ERROR(Wire(bytes).Each([&](uint32_t field, int type, uint64_t, std::string_view sub) -> Status {
    if (field == 3 && type == 2) return build_options(sub);
    return OkStatus();
  }));
  if (o.num_replicas < 1) o.num_replicas = 1;
  if (o.num_partitions < 1) o.num_partitions = 1;
  if (!by_computation.empty()) {
    const size_t replicas = by_computation[0].size();
    for (const auto& c : by_computation)
      if (c.size() != replicas || (replica_count > 0 && static_cast<int64_t>(replicas) != replica_count))
        return InvalidArgumentError("tpumesh: the compile options' device assignment is not rectangular");
    o.devices.assign(replicas, std::vector<int64_t>(by_computation.size()));
    for (size_t p = 0; p < by_computation.size(); ++p)
      for (size_t r = 0; r < replicas; ++r) o.devices[r][p] = by_computation[p][r];
  }
  return o;
}

namespace {

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutBytes(std::string& out, uint32_t field, const std::string& bytes) {
  PutVarint(out, (uint64_t{field} << 3) | 2);
  PutVarint(out, bytes.size());
  out += bytes;
}

}  // namespace

std::string SerializeOpSharding(const std::vector<int64_t>& tiles, int64_t replicas, int64_t unreduced,
                                const std::vector<int64_t>& devices) {
  constexpr uint64_t kReplicated = 0, kOther = 3, kUnreduced = 6;  // xla.OpSharding.Type
  std::string out;
  bool split = unreduced > 1;
  for (int64_t t : tiles) split = split || t > 1;
  PutVarint(out, (1 << 3) | 0);  // type
  if (!split) {
    PutVarint(out, kReplicated);
    return out;
  }
  PutVarint(out, kOther);
  std::string dims, ids, subgroups;
  for (int64_t t : tiles) PutVarint(dims, static_cast<uint64_t>(t));
  if (replicas > 1) {
    PutVarint(dims, static_cast<uint64_t>(replicas));
    PutVarint(subgroups, kReplicated);
  }
  if (unreduced > 1) {
    PutVarint(dims, static_cast<uint64_t>(unreduced));
    PutVarint(subgroups, kUnreduced);
  }
  for (int64_t d : devices) PutVarint(ids, static_cast<uint64_t>(d));
  PutBytes(out, 3, dims);  // tile_assignment_dimensions, packed
  PutBytes(out, 4, ids);   // tile_assignment_devices, packed
  if (unreduced > 1) {
    PutBytes(out, 8, subgroups);  // last_tile_dims, packed
  } else if (replicas > 1) {
    PutVarint(out, (6 << 3) | 0);  // replicate_on_last_tile_dim
    PutVarint(out, 1);
  }
  return out;
}

std::string SerializeDeviceAssignment(const std::vector<std::vector<int64_t>>& devices) {
  const size_t replicas = devices.size(), partitions = devices.empty() ? 0 : devices[0].size();
  std::string out;
  PutVarint(out, (1 << 3) | 0);
  PutVarint(out, replicas);
  PutVarint(out, (2 << 3) | 0);
  PutVarint(out, partitions);
  for (size_t p = 0; p < partitions; ++p) {
    std::string ids;
    for (size_t r = 0; r < replicas; ++r) PutVarint(ids, static_cast<uint64_t>(devices[r][p]));
    std::string computation;
    PutBytes(computation, 1, ids);  // packed replica_device_ids
    PutBytes(out, 3, computation);
  }
  return out;
}

}  // namespace tpumesh::pjrt
