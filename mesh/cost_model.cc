#include "mesh/cost_model.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul_cost.h"

namespace tpumesh::mesh {
namespace {

// The (8 sublanes x 128 lanes) vector unit of a TensorCore, with 2 f32 ALUs
// per (lane, sublane): "How to Scale Your Model", part 2, Appendix C ("Each
// (lane, sublane) pair on v4 contains 2 standard floating-point and integer
// ALUs ... 2048 floating point adders in v4"), used for every chip. One
// transcendental per lane per cycle is assumed (no published rate).
// docs/cost-model.md gives the sensitivity of the validation to both.
constexpr double kVpuLanes = 8 * 128;
constexpr double kVpuFlopsPerLanePerCycle = 2;
constexpr double kTranscendentalsPerLanePerCycle = 1;

double TensorCoresPerDevice(const ChipSpec& c) {
  return static_cast<double>(c.tensorcores_per_chip) / std::max(1, c.devices_per_chip);
}

}  // namespace

double VectorFlopsPerSecond(const ChipSpec& c) {
  return kVpuLanes * kVpuFlopsPerLanePerCycle * c.clock_hz * TensorCoresPerDevice(c);
}

double TranscendentalsPerSecond(const ChipSpec& c) {
  return kVpuLanes * kTranscendentalsPerLanePerCycle * c.clock_hz * TensorCoresPerDevice(c);
}

void CountBytesAsBf16(OpRecord& r) {
  r.cost.bytes_read *= 0.5;
  r.cost.bytes_written *= 0.5;
  r.attention.element_bytes *= 0.5;
  for (MxuMatmul& m : r.mxu) {
    m.a_bytes *= 0.5;
    m.b_bytes *= 0.5;
    m.c_bytes *= 0.5;
  }
}

VmemTraffic TileIntoVmem(const MxuMatmul& mm, double vmem, kernels::Dataflow dataflow) {
  VmemTraffic v;
  const double all = mm.a_bytes + mm.b_bytes + mm.c_bytes;
  if (vmem <= 0 || all <= 0) return v;
  v.vmem_bytes = std::min(vmem, all);
  double stationary = mm.b_bytes, streamed = mm.a_bytes;  // ws
  if (dataflow == kernels::Dataflow::kInputStationary) {
    stationary = mm.a_bytes;
    streamed = mm.b_bytes;
  } else if (dataflow == kernels::Dataflow::kOutputStationary) {
    stationary = mm.c_bytes;
  }
  v.parts = std::max(1.0, std::ceil(stationary / (vmem / 2)));  // a double: past 2^63 at the limits
  v.extra_read_bytes = (v.parts - 1) * streamed;
  return v;
}

double VmemPerDevice(const ChipSpec& c) { return static_cast<double>(c.vmem_bytes) * TensorCoresPerDevice(c); }

kernels::SystolicArray DeviceArray(const ChipSpec& c) {
  return kernels::SystolicArray(c.mxu_rows, c.mxu_cols, std::max(1, c.mxus_per_chip() / std::max(1, c.devices_per_chip)),
                                c.clock_hz, c.dataflow);
}

int64_t FlashBlockQ(double element_bytes) { return element_bytes <= 2 ? 1024 : 512; }

int64_t FlashBlockKv(const AttentionSite& a) {
  if (a.kv_len != a.q_len) return (a.kv_len + 127) / 128 * 128;
  return FlashBlockQ(a.element_bytes);
}

AttentionTraffic FusedAttentionTraffic(const AttentionSite& a, AttentionKernel kernel) {
  AttentionTraffic t;
  if (a.count <= 0) return t;
  const double q = static_cast<double>(a.q_len), kv = static_cast<double>(a.kv_len),
               d = static_cast<double>(a.head_dim);
  if (kernel == AttentionKernel::kStandard) {
    t.hbm_bytes = 4 * a.count * q * kv * a.element_bytes;
    return t;
  }
  const double block_q = static_cast<double>(FlashBlockQ(a.element_bytes));
  const double block_kv = static_cast<double>(FlashBlockKv(a));
  const double q_blocks = std::ceil(q / block_q), kv_blocks = std::ceil(kv / block_kv);
  if (kv_blocks > 1) t.hbm_bytes = (q_blocks - 1) * a.count * 2 * kv * d * a.element_bytes;
  t.transcendentals = a.count * q * kv_blocks;
  t.vector_flops = a.count * q * kv_blocks * (3 + 2 * d);
  return t;
}

OpTiming PriceOp(const OpRecord& op, const ChipSpec& chip) {
  OpTiming t;
  const kernels::SystolicArray array = DeviceArray(chip);
  double buffer_bytes = 0;  // the MXU's traffic with VMEM
  for (const MxuMatmul& mm : op.mxu) {
    const kernels::MatmulCostFigures f = kernels::MatmulCost(mm.m, mm.n, mm.k, op.precision, array);
    buffer_bytes += (f.buffer_read_bytes + f.buffer_write_bytes) * mm.count;
    t.mxu_cycles += f.cycles * mm.count;
    t.mxu_seconds += f.seconds * mm.count;
    t.mxu_flops += f.flops * mm.count;
    t.mxu_useful_macs += f.useful_macs * mm.count;
    t.mxu_capacity_macs += f.cycles * array.rows * array.cols * array.count * mm.count;
  }
  // What the MXU does not do runs on the vector unit. kernels' figures count
  // a matmul's flops once (2 m n k); the MXU's figure counts every pass.
  double mxu_single_pass = 0;
  for (const MxuMatmul& mm : op.mxu) mxu_single_pass += 2.0 * mm.m * mm.n * mm.k * mm.count;
  const AttentionTraffic attention = FusedAttentionTraffic(op.attention, chip.attention);
  const double vector_flops = std::max(0.0, op.cost.flops - mxu_single_pass) + attention.vector_flops;
  const double transcendentals = op.cost.transcendentals + attention.transcendentals;
  t.vector_seconds = vector_flops / VectorFlopsPerSecond(chip) + transcendentals / TranscendentalsPerSecond(chip);
  t.hbm_bytes = op.cost.bytes() + attention.hbm_bytes;
  for (const MxuMatmul& mm : op.mxu) {
    const VmemTraffic v = TileIntoVmem(mm, VmemPerDevice(chip), chip.dataflow);
    t.hbm_bytes += v.extra_read_bytes * mm.count;
    t.vmem_bytes = std::max(t.vmem_bytes, v.vmem_bytes);
  }
  t.hbm_seconds = t.hbm_bytes / chip.hbm_bandwidth_per_device();
  t.ici_seconds = op.ici_seconds;
  t.seconds = std::max(t.mxu_seconds + t.vector_seconds, t.hbm_seconds) + t.ici_seconds;
  t.utilisation = t.mxu_capacity_macs > 0 ? std::min(1.0, t.mxu_useful_macs / t.mxu_capacity_macs) : 0;
  t.vmem_access_bytes = t.hbm_bytes + (op.mxu.empty() ? op.cost.bytes() : buffer_bytes);
  const EnergySpec& e = chip.energy;
  constexpr double kPico = 1e-12;
  t.energy.mxu = t.mxu_useful_macs * e.mac_pj * kPico;
  t.energy.vector = (vector_flops * e.vector_flop_pj + transcendentals * e.transcendental_pj) * kPico;
  t.energy.vmem = t.vmem_access_bytes * e.vmem_byte_pj * kPico;
  t.energy.hbm = t.hbm_bytes * e.hbm_byte_pj * kPico;
  t.energy.ici = static_cast<double>(op.ici_bytes) * e.ici_byte_pj * kPico;
  return t;
}

namespace {

void Accumulate(const OpRecord& op, const OpTiming& t, double repeat, OpTypeTotals& s) {
  s.count += static_cast<int64_t>(repeat);
  s.flops += op.cost.flops * repeat;
  s.bytes += t.hbm_bytes * repeat;
  s.vmem_bytes = std::max(s.vmem_bytes, t.vmem_bytes);
  s.transcendentals += op.cost.transcendentals * repeat;
  s.modelled_seconds += t.seconds * repeat;
  s.mxu_seconds += t.mxu_seconds * repeat;
  s.vector_seconds += t.vector_seconds * repeat;
  s.hbm_seconds += t.hbm_seconds * repeat;
  s.ici_seconds += t.ici_seconds * repeat;
  s.ici_bytes += static_cast<double>(op.ici_bytes) * repeat;
  s.host_seconds += op.host_seconds * repeat;
  s.mxu_cycles += static_cast<double>(t.mxu_cycles) * repeat;
  s.mxu_useful_macs += t.mxu_useful_macs * repeat;
  s.mxu_capacity_macs += t.mxu_capacity_macs * repeat;
  s.vmem_access_bytes += t.vmem_access_bytes * repeat;
  s.energy.Add(t.energy, repeat);
}

}  // namespace

std::string OpTypeTotals::bound() const {
  const double compute = mxu_seconds + vector_seconds;
  if (ici_seconds > 0 && ici_seconds >= std::max(compute, hbm_seconds)) return "ICI";
  if (hbm_seconds > compute) return "HBM";
  return mxu_seconds >= vector_seconds ? "MXU" : "vector";
}

void DeviceCostLog::Add(const OpRecord& op, const OpTiming& t, double repeat) {
  if (state_.use_count() > 1) state_ = std::make_shared<State>(*state_);  // this copy's own from now on
  State& s = *state_;
  Accumulate(op, t, repeat, s.by_type[op.type]);
  const std::string key = op.module + "\n" + op.name + "\n" + op.shape;
  auto [it, fresh] = s.layer_index.emplace(key, s.layers.size());
  if (fresh) s.layers.push_back({op.module.empty() ? op.name : op.module, op.name, op.type, op.shape, {}});
  Accumulate(op, t, repeat, s.layers[it->second].totals);
  if (op.type == "collective") {
    Accumulate(op, t, repeat, s.by_collective[op.name]);
    ModuleCollectives& m = s.by_module[op.module];
    if (m.kind.empty()) {
      m.kind = op.name;
    } else if (("+" + m.kind + "+").find("+" + op.name + "+") == std::string::npos) {
      m.kind += "+" + op.name;
    }
    Accumulate(op, t, repeat, m.totals);
  }
  // The timeline (the header comment): first the waits for the results this
  // op reads, earliest done first, each charged to its collective's kind.
  std::vector<State::Pending> waits;
  for (const int64_t id : op.awaits) {
    auto it = s.pending.find(id);
    if (it == s.pending.end()) continue;
    waits.push_back(it->second);
    s.pending.erase(it);
  }
  std::sort(waits.begin(), waits.end(), [](const State::Pending& a, const State::Pending& b) { return a.done < b.done; });
  for (const State::Pending& w : waits) {
    if (w.done <= s.now) continue;
    s.exposed[w.kind] += w.done - s.now;
    s.now = w.done;
  }
  const double start = s.now;
  for (const State::Pending& w : waits)
    if (w.prefetch) s.prefetch_from = start;  // the next prefetch may start under this op
  double ici_start = s.now;
  s.serial += t.seconds * repeat;
  if (t.ici_seconds <= 0) {
    s.now += t.seconds * repeat;
  } else if (overlap_ && op.async_id != 0 && repeat == 1) {
    // Started when its operand is ready and the ICI free; read later.
    s.now += t.seconds - t.ici_seconds;
    const double ready = op.prefetch && s.prefetch_from >= 0 ? std::min(s.now, s.prefetch_from) : s.now;
    ici_start = std::max(ready, s.ici_free);
    s.ici_free = ici_start + t.ici_seconds;
    s.ici_kind = op.name;
    s.pending[op.async_id] = {s.ici_free, op.name, op.prefetch};
  } else if (s.ici_free <= s.now) {
    // Waited for at once on a free ICI: as serial, to the bit.
    ici_start = s.now + (t.seconds - t.ici_seconds) * repeat;
    s.now += t.seconds * repeat;
    s.ici_free = s.now;
    s.ici_kind = op.name;
    s.exposed[op.name] += t.ici_seconds * repeat;
  } else {
    // Waited for at once, behind the collective still on the ICI.
    s.now += (t.seconds - t.ici_seconds) * repeat;
    ici_start = std::max(s.now, s.ici_free);
    if (ici_start > s.now) s.exposed[s.ici_kind] += ici_start - s.now;
    s.exposed[op.name] += t.ici_seconds * repeat;
    s.now = ici_start + t.ici_seconds * repeat;
    s.ici_free = s.now;
    s.ici_kind = op.name;
  }
  if (keep_ops_) s.ops.push_back({op, t, start, ici_start});
}

std::map<std::string, OpTypeTotals> DeviceCostLog::by_collective_hidden() const {
  std::map<std::string, OpTypeTotals> kinds = state_->by_collective;
  const double tail = std::max(0.0, state_->ici_free - state_->now);  // the cores done, the ICI not
  for (auto& [kind, t] : kinds) {
    auto it = state_->exposed.find(kind);
    const double exposed = (it == state_->exposed.end() ? 0 : it->second) + (kind == state_->ici_kind ? tail : 0);
    t.ici_hidden_seconds = t.ici_seconds - exposed;
  }
  return kinds;
}

OpTypeTotals DeviceCostLog::total() const {
  OpTypeTotals all;
  for (const auto& [type, s] : state_->by_type) {
    all.count += s.count;
    all.flops += s.flops;
    all.bytes += s.bytes;
    all.vmem_bytes = std::max(all.vmem_bytes, s.vmem_bytes);
    all.transcendentals += s.transcendentals;
    all.modelled_seconds += s.modelled_seconds;
    all.mxu_seconds += s.mxu_seconds;
    all.vector_seconds += s.vector_seconds;
    all.hbm_seconds += s.hbm_seconds;
    all.ici_seconds += s.ici_seconds;
    all.ici_bytes += s.ici_bytes;
    all.host_seconds += s.host_seconds;
    all.mxu_cycles += s.mxu_cycles;
    all.mxu_useful_macs += s.mxu_useful_macs;
    all.mxu_capacity_macs += s.mxu_capacity_macs;
    all.vmem_access_bytes += s.vmem_access_bytes;
    all.energy.Add(s.energy);
  }
  return all;
}

}  // namespace tpumesh::mesh
