// A run's report across the ranks of a cluster (mesh/cluster.h): each rank
// measured and recorded its own devices; this brings every device's op
// records, HBM peak and every rank's host time to rank 0, which prices them
// all, so that the report, CSV and trace cover every device of every rank.
//
// Contract:
// - FinishAcrossRanks is collective over mesh.cluster(): every rank calls
//   it once at the same point of the run. records[d] and hbm_peak[d] (both
//   sized to the mesh's devices) are read for this rank's devices only.
// - On rank 0 the report ends as RunReport::Finish(records, keep_ops) over
//   every device would leave it in one process: the records travel whole
//   (every field, doubles bit for bit) and are priced on rank 0, so the
//   figures are the same bits; hbm_peak_bytes holds every device's peak and
//   host_seconds_per_rank each rank's `host_seconds`, host_seconds their
//   maximum. On the other ranks logs hold this rank's devices only (others'
//   logs are empty) and host_seconds_per_rank is empty.
// - One process: Finish, hbm_peak_bytes = hbm_peak, host_seconds_per_rank =
//   {host_seconds}.
// - EncodeRecords / DecodeRecords: the wire form of record lists, for other
//   collections (simulate's dry runs).
#ifndef TPUMESH_REPORT_RANK_REPORT_H_
#define TPUMESH_REPORT_RANK_REPORT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "mesh/cluster.h"
#include "mesh/cost_model.h"
#include "mesh/mesh.h"
#include "report/report.h"

namespace tpumesh::report {

Status FinishAcrossRanks(mesh::Mesh& mesh, const std::vector<std::vector<mesh::OpRecord>>& records,
                         const std::vector<int64_t>& hbm_peak, double host_seconds, bool keep_ops,
                         RunReport* report);

// Appends `lists` (each with an int64 tag: a device or a class) to `out`.
struct TaggedRecords {
  int64_t tag = 0;
  int64_t value = 0;  // figures sent along (an HBM peak, parameter bytes)
  int64_t extra = 0;
  const std::vector<mesh::OpRecord>* records = nullptr;
};
void EncodeRecords(std::span<const TaggedRecords> lists, mesh::Bytes* out);
struct DecodedRecords {
  int64_t tag = 0;
  int64_t value = 0;
  int64_t extra = 0;
  std::vector<mesh::OpRecord> records;
};
// InternalError on a malformed blob (`from` names its sender).
StatusOr<std::vector<DecodedRecords>> DecodeRecords(std::span<const std::byte> blob, const std::string& from);

}  // namespace tpumesh::report

#endif  // TPUMESH_REPORT_RANK_REPORT_H_
