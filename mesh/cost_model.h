// The chip's view of the work: what each op costs on one device of the
// emulated chip, beside execution and never inside the kernels (as XLA's
// HloCostAnalysis beside its executables).
//
// An OpRecord is what an op states about itself when it runs (models/nn.h
// emits one per layer call when its Ctx has a recorder, in real runs and in
// dry runs alike): its figures (kernels/cost.h's flop, byte and
// transcendental counts) and, for the MXU's work, the matmuls it is made of.
// PriceOp turns a record into time on a ChipSpec:
//
//   mxu_seconds    sum over its matmuls of the systolic cycles in the
//                  chip's dataflow (kernels/matmul_cost.h: ws, a TPU's,
//                  ceil(folds / MXUs) x (2R + C + M - 2)) / clock
//   vector_seconds (flops not done on the MXU) / vector throughput
//                  + transcendentals / transcendental throughput
//   hbm_seconds    (bytes read + written, plus an attention's traffic
//                  under the chip's AttentionKernel: FusedAttentionTraffic)
//                  / HBM bandwidth
//   seconds        max(mxu + vector, hbm): the roofline of an op whose
//                  operands stream from HBM while the units work (XLA fuses
//                  an op's elementwise tail into it, so MXU and vector work
//                  of one op add up; memory overlaps with both), plus
//                  ici_seconds for a collective: the serial figure, as if
//                  the ops after it waited for its result
//   utilisation    the MXU's useful MACs / (cycles x its MAC slots)
//   energy         an estimate, in joules, from the chip's EnergySpec
//                  (dynamic energy only; docs/cost-model.md "Energy"):
//                    MXU     useful MACs x passes x mac_pj
//                    vector  vector flops x vector_flop_pj
//                            + transcendentals x transcendental_pj
//                    VMEM    vmem_access_bytes x vmem_byte_pj, where the
//                            accesses are every HBM byte once (the DMA
//                            side) plus the MXU's buffer traffic in the
//                            chip's dataflow (kernels/matmul_cost.h), or
//                            for an op without matmuls its own bytes (the
//                            vector unit's side)
//                    HBM     hbm_bytes x hbm_byte_pj
//                    ICI     bytes this device sends x ici_byte_pj
//
// A device's timeline (DeviceCostLog) has two resources, the cores (each
// op's roofline, in program order) and the ICI (collectives, one at a time
// in program order). Serial (overlap off): every op, collectives included,
// runs after the one before, as the seconds above add up. Overlapped (on,
// as XLA runs collectives on a TPU: async start/done pairs placed by its
// latency-hiding scheduler): a collective with an async_id starts on the
// ICI when the op before it is done (its operand ready) and the ICI is free;
// the cores go on, and only a record that lists it in `awaits` (the op
// reading its result) waits for its done. Conservative: a collective never
// starts before its place in the program (no reordering), a collective
// without async_id (its result read by the very next op: Megatron's
// row-parallel psum, a partitioner's reshard) or standing for repeated
// calls (repeat > 1) is waited for at once, and the device is done when its
// last collective is. One exception to "its place in the program": a
// prefetch (an FSDP weight all_gather, whose operand, the weight's shard,
// is ready from the start) may start as early as the start of the op that
// read the previous prefetch: one layer ahead, as XLA prefetches FSDP
// weights. docs/cost-model.md ("Collectives overlapped with compute").
//
// Vector throughput (per device): VPU lanes x ALUs per lane x clock, with
// the (8 sublanes x 128 lanes) VPU and 2 f32 ALU ops per lane per cycle, and
// 1 transcendental per lane per cycle — docs/cost-model.md gives sources and
// the caveats. Collectives are priced by mesh/interconnect.h when they are
// recorded (OpRecord::ici_seconds).
#ifndef TPUMESH_MESH_COST_MODEL_H_
#define TPUMESH_MESH_COST_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cost.h"
#include "kernels/matmul.h"
#include "kernels/matmul_cost.h"
#include "mesh/chip_spec.h"

namespace tpumesh::mesh {

// One matmul the MXU runs: count times C[m, n] = A[m, k] x B[k, n].
// a_bytes, b_bytes, c_bytes: what the op moves of A, B and C through HBM
// (a conv's A is its input, not the im2col matrix); when given, the matmul
// is tiled into VMEM (VmemTraffic). All 0: not tiled (attention: its
// traffic beyond Q, K, V and O is FusedAttentionTraffic's).
struct MxuMatmul {
  int64_t m = 0, n = 0, k = 0;
  double count = 1;
  double a_bytes = 0, b_bytes = 0, c_bytes = 0;
};

// A matmul's operands tiled into `vmem` bytes of VMEM in a dataflow. The
// stationary operand S (ws: B, is: A, os: C) is held in half of VMEM, the
// other half double-buffers the streamed tiles. When S does not fit, it is
// cut into p = ceil(|S| / (vmem / 2)) parts, each loaded once, and the
// streamed input an S part pairs with is read again for every part: ws and
// os read A p times (B split by columns, C by columns), is reads B p times
// (A split by rows). So HBM bytes = |A| + |B| + |C| + extra_reads, falling
// as VMEM grows and flat once S fits. vmem 0: no VMEM modelled, each
// operand once. docs/cost-model.md ("VMEM and HBM traffic").
struct VmemTraffic {
  double extra_read_bytes = 0;  // the re-reads beyond each operand once
  double parts = 1;             // p (an integer; exact below 2^53)
  double vmem_bytes = 0;        // what the tiling holds: min(vmem, |A| + |B| + |C|)
};
VmemTraffic TileIntoVmem(const MxuMatmul& mm, double vmem, kernels::Dataflow dataflow);

// An attention's scores, for pricing them by the chip's AttentionKernel
// (ChipSpec::attention): count (batch x heads) score matrices of q_len x
// kv_len, head size head_dim, element_bytes per element of Q, K, V, O and
// the scores in HBM (2: bf16, 4: f32). The record's own bytes count Q, K, V
// and O once and no score traffic; FusedAttentionTraffic adds what the kernel
// moves and computes beyond that. count 0: not an attention.
struct AttentionSite {
  double count = 0;
  int64_t q_len = 0, kv_len = 0, head_dim = 0;
  double element_bytes = 4;
};

// The flash kernel's blocks, as maxdiffusion sizes them for jax's splash
// attention (maxdiffusion/models/attention_flax.py
// _select_flash_block_sizes, when its config gives none): queries in blocks
// of 1024 in bf16, 512 in f32; self-attention's keys in blocks of the same
// size; cross-attention's keys (kv_len != q_len) in one block of kv_len
// rounded up to 128.
int64_t FlashBlockQ(double element_bytes);
int64_t FlashBlockKv(const AttentionSite& a);

// What an attention moves and computes beyond its record's bytes and flops.
//   flash:    HBM: K and V again for every block of queries after the first
//             when the keys span more than one block (the kernel's grid
//             walks the key blocks for each query block; with one key block
//             its K and V stay in VMEM): (ceil(q_len / block_q) - 1) x
//             |K + V| when kv_len > block_kv, else 0.
//             Vector: per query row and key block, the online softmax's
//             rescale: alpha = exp(m_old - m_new) (1 transcendental), the
//             running max and l = alpha l + rowsum (3 flops), acc = alpha acc
//             + P V (2 head_dim flops).
//   standard: HBM: the score matrix S written by Q K^T and read by the
//             softmax, P written by it and read by P V: 4 x count x q_len x
//             kv_len x element_bytes. No vector work beyond the record's.
struct AttentionTraffic {
  double hbm_bytes = 0, vector_flops = 0, transcendentals = 0;
};
AttentionTraffic FusedAttentionTraffic(const AttentionSite& a, AttentionKernel kernel);

struct OpRecord {
  std::string name;   // the layer: "conv2d", "linear", "attention", "group_norm", ...
  std::string type;   // report category: matmul, conv, attention, norm, elementwise, data
  std::string shape;  // e.g. "x[2,320,64,64] w[320,320,3,3]"
  kernels::OpCost cost;
  std::vector<MxuMatmul> mxu;  // empty: no MXU work
  kernels::Precision precision = kernels::Precision::kDefault;
  double host_seconds = 0;  // measured on this host; 0 in a dry run
  double repeat = 1;        // identical calls this record stands for (a workload's "repeat")
  // A collective (type "collective", name "psum", "all_gather", ...): its
  // time on the ICI and the bytes this device sends, priced when it is
  // recorded (mesh/interconnect.h needs the group's place on the topology);
  // `module` names the layer it belongs to ("up_blocks.1.resnets.0").
  double ici_seconds = 0;
  int64_t ici_bytes = 0;
  std::string module;
  AttentionSite attention;  // count 0: not an attention
  // Overlap (see the header comment): a collective's id, unique within a
  // device's records (0: waited for at once), and the ids of the async
  // collectives whose results this record reads.
  int64_t async_id = 0;
  std::vector<int64_t> awaits;
  bool prefetch = false;  // an async collective that may start one layer ahead
};

// Estimated dynamic energy, joules, by where it is spent.
struct EnergyJoules {
  double mxu = 0, vector = 0, vmem = 0, hbm = 0, ici = 0;
  double total() const { return mxu + vector + vmem + hbm + ici; }
  // Adds `e` x `times` part by part.
  void Add(const EnergyJoules& e, double times = 1) {
    mxu += e.mxu * times;
    vector += e.vector * times;
    vmem += e.vmem * times;
    hbm += e.hbm * times;
    ici += e.ici * times;
  }
};

struct OpTiming {
  double mxu_seconds = 0;
  double vector_seconds = 0;
  double hbm_seconds = 0;
  double ici_seconds = 0;  // a collective's time on the interconnect
  double hbm_bytes = 0;    // the op's bytes plus its matmuls' VMEM re-reads
  double vmem_bytes = 0;   // the most its tiled matmuls hold in VMEM
  double seconds = 0;      // the op's modelled time
  double mxu_flops = 0;    // flops done on the MXU (2 m n k per pass)
  double utilisation = 0;  // of the MXU while it works on this op, 0..1
  double mxu_cycles = 0;   // a whole number (kernels::MatmulCostFigures::cycles)
  double mxu_capacity_macs = 0;  // cycles x R x C x MXUs: what the cycles could have done
  double mxu_useful_macs = 0;
  double vmem_access_bytes = 0;  // bytes read from and written to VMEM (see energy above)
  EnergyJoules energy;           // an estimate
};

// The systolic arrays of one device of `chip`: its MXUs (at least one), their
// size, clock and dataflow.
kernels::SystolicArray DeviceArray(const ChipSpec& chip);

// kernels count an op's bytes as f32; at precision default its operands sit
// in HBM as bf16: halves the record's bytes and its matmuls' operand bytes.
void CountBytesAsBf16(OpRecord& record);

// Vector-unit figures of one device of `chip` (see the header comment).
double VectorFlopsPerSecond(const ChipSpec& chip);
double VmemPerDevice(const ChipSpec& chip);  // vmem_bytes x TensorCores per device
double TranscendentalsPerSecond(const ChipSpec& chip);

OpTiming PriceOp(const OpRecord& op, const ChipSpec& chip);

// Per report category: how many ops, their figures and times.
struct OpTypeTotals {
  int64_t count = 0;
  double flops = 0, bytes = 0, transcendentals = 0;  // bytes: HBM traffic (OpTiming::hbm_bytes)
  double vmem_bytes = 0;  // the most one op held in VMEM
  double modelled_seconds = 0, mxu_seconds = 0, vector_seconds = 0, hbm_seconds = 0;
  double ici_seconds = 0, ici_bytes = 0;
  // Of ici_seconds, what ran under compute (overlap on): the cores did not
  // wait for it. By collective kind (DeviceCostLog::by_collective) and per
  // device (DeviceCostLog::ici_hidden_seconds); 0 elsewhere.
  double ici_hidden_seconds = 0;
  double host_seconds = 0;
  double mxu_cycles = 0;
  double mxu_useful_macs = 0, mxu_capacity_macs = 0;
  double vmem_access_bytes = 0;
  EnergyJoules energy;  // an estimate
  // Estimated energy over modelled time; 0 when no time.
  double average_watts() const { return modelled_seconds > 0 ? energy.total() / modelled_seconds : 0; }
  double utilisation() const {
    return mxu_capacity_macs > 0 ? std::min(1.0, mxu_useful_macs / mxu_capacity_macs) : 0;
  }
  // What bounds these ops' modelled time: "ICI" when collectives take the
  // most, else "HBM" when memory outlasts the compute, else the larger of
  // "MXU" and "vector".
  std::string bound() const;
};

// One layer's ops on a device: the same module (OpRecord::module; the op
// kind when empty), layer kind and shape, over every call.
struct LayerTotals {
  std::string module, name, type, shape;
  OpTypeTotals totals;
};

// The ops one device ran, priced, in order, with running totals. A copy
// shares the totals with the log it came from until either is added to
// (copy on write), so the devices of a mesh that ran the same ops (every
// replica along `data`) hold one log between them, not one each.
class DeviceCostLog {
 public:
  // Collectives overlapped with compute (true) or serial; set before Add.
  void set_overlap(bool overlap) { overlap_ = overlap; }
  void Add(const OpRecord& op, const OpTiming& t, double repeat = 1);
  const std::map<std::string, OpTypeTotals>& by_type() const { return state_->by_type; }
  // Per layer, in the order each first ran; each op is in exactly one.
  const std::vector<LayerTotals>& layers() const { return state_->layers; }
  OpTypeTotals total() const;
  // The collectives (type "collective") by kind ("psum", "all_gather") and
  // by the layer that ran them (OpRecord::module; its kind or kinds joined
  // by "+").
  const std::map<std::string, OpTypeTotals>& by_collective() const { return state_->by_collective; }
  struct ModuleCollectives {
    std::string kind;
    OpTypeTotals totals;
  };
  const std::map<std::string, ModuleCollectives>& collectives_by_module() const { return state_->by_module; }
  // The ops in order (kept when keep_ops, for traces), with their start on
  // the device's modelled timeline (ici_start_seconds: its ICI part's).
  struct Entry {
    OpRecord op;
    OpTiming timing;
    double start_seconds = 0;
    double ici_start_seconds = 0;
  };
  void set_keep_ops(bool keep) { keep_ops_ = keep; }
  const std::vector<Entry>& ops() const { return state_->ops; }
  // The device's modelled time: its last op's end or its last collective's
  // done, whichever is later.
  double seconds() const { return std::max(state_->now, state_->ici_free); }
  // Every op after the one before: the sum of the ops' seconds.
  double serial_seconds() const { return state_->serial; }
  // Of the ICI time, what ran under compute: serial_seconds() - seconds().
  double ici_hidden_seconds() const { return serial_seconds() - seconds(); }
  // by_collective() with each kind's ici_hidden_seconds.
  std::map<std::string, OpTypeTotals> by_collective_hidden() const;

 private:
  struct State {
    std::map<std::string, OpTypeTotals> by_type;
    std::vector<LayerTotals> layers;
    std::map<std::string, size_t> layer_index;  // module \n name \n shape -> layers
    std::map<std::string, OpTypeTotals> by_collective;
    std::map<std::string, ModuleCollectives> by_module;
    std::vector<Entry> ops;
    double now = 0;       // the cores' clock: when the last op ended
    double ici_free = 0;  // when the ICI's last collective is done
    std::string ici_kind;  // that collective's kind
    double serial = 0;
    struct Pending {
      double done = 0;
      std::string kind;
      bool prefetch = false;
    };
    double prefetch_from = -1;  // the start of the op that read the last prefetch; -1: none yet
    std::map<int64_t, Pending> pending;  // async collectives not yet read
    std::map<std::string, double> exposed;  // per kind: how long the cores waited for it
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  bool keep_ops_ = false;
  bool overlap_ = true;
};

}  // namespace tpumesh::mesh

#endif  // TPUMESH_MESH_COST_MODEL_H_
