// The --report / --trace files of generate, eval and simulate, written the
// same way, with a line on stdout naming each.
#ifndef TPUMESH_TOOLS_REPORT_OUTPUT_H_
#define TPUMESH_TOOLS_REPORT_OUTPUT_H_

#include <string>

#include "base/status.h"
#include "pipeline/report.h"

namespace tpumesh::tools {

// Empty paths are skipped.
Status WriteReportFiles(const pipeline::RunReport& report, const std::string& report_path,
                        const std::string& trace_path);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_REPORT_OUTPUT_H_
