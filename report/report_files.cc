#include "report/report_files.h"

#include <cstdio>

#include "io/atomic_file.h"

namespace tpumesh::report {

void PrintReportFiles(const ReportPaths& p) {
  if (!p.report.empty()) std::printf("report: %s\n", p.report.c_str());
  if (!p.trace.empty()) std::printf("trace: %s (open in https://ui.perfetto.dev)\n", p.trace.c_str());
  if (!p.csv.empty()) std::printf("per-layer CSV: %s\n", p.csv.c_str());
}

void AddReportFiles(const RunReport& report, const ReportPaths& p,
                    std::vector<std::pair<std::string, std::string>>* files) {
  if (!p.report.empty()) files->emplace_back(p.report, ReportJson(report));
  if (!p.trace.empty()) files->emplace_back(p.trace, TraceJson(report));
  if (!p.csv.empty()) files->emplace_back(p.csv, LayersCsv(report));
}

Status WriteReportFiles(const RunReport& report, const ReportPaths& p) {
  std::vector<std::pair<std::string, std::string>> files;
  AddReportFiles(report, p, &files);
  TPUMESH_RETURN_IF_ERROR(WriteFilesAtomic(files));
  PrintReportFiles(p);
  return OkStatus();
}

}  // namespace tpumesh::report
