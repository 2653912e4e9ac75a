#include "tools/report_output.h"

#include <cstdio>

namespace tpumesh::tools {

Status WriteReportFiles(const pipeline::RunReport& report, const std::string& report_path,
                        const std::string& trace_path) {
  if (!report_path.empty()) {
    TPUMESH_RETURN_IF_ERROR(pipeline::WriteReportJson(report_path, report));
    std::printf("report: %s\n", report_path.c_str());
  }
  if (!trace_path.empty()) {
    TPUMESH_RETURN_IF_ERROR(pipeline::WriteTraceJson(trace_path, report));
    std::printf("trace: %s (open in https://ui.perfetto.dev)\n", trace_path.c_str());
  }
  return OkStatus();
}

}  // namespace tpumesh::tools
