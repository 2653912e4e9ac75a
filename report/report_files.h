// The files of the chip's view of a run (--report, --trace, --report-csv of
// generate, eval, simulate and run; report=, trace=, report_csv= of the
// Python module), written the same way everywhere, with a line on stdout
// naming each.
//
// Contract: AddReportFiles only appends (path, bytes) pairs, skipping empty
// paths; WriteReportFiles writes them all or none (io/atomic_file.h
// WriteFilesAtomic) and then prints PrintReportFiles' lines.
#ifndef TPUMESH_REPORT_REPORT_FILES_H_
#define TPUMESH_REPORT_REPORT_FILES_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "report/report.h"

namespace tpumesh::report {

// Where the chip's view goes; empty: not written.
struct ReportPaths {
  std::string report;  // JSON (ReportJson)
  std::string trace;   // Chrome trace (Perfetto; TraceJson)
  std::string csv;     // per-layer CSV (LayersCsv)
  bool any() const { return !report.empty() || !trace.empty() || !csv.empty(); }
  // (flag, path) pairs, for io/run_files.h CheckRunFiles.
  std::vector<std::pair<std::string, std::string>> flags() const {
    return {{"--report", report}, {"--trace", trace}, {"--report-csv", csv}};
  }
};

// Appends the report's files to a run's outputs (written together,
// io/atomic_file.h WriteFilesAtomic).
void AddReportFiles(const RunReport& report, const ReportPaths& paths,
                    std::vector<std::pair<std::string, std::string>>* files);
// AddReportFiles and the write, for a run with no other output.
Status WriteReportFiles(const RunReport& report, const ReportPaths& paths);
// The line on stdout for each report file written.
void PrintReportFiles(const ReportPaths& paths);

}  // namespace tpumesh::report

#endif  // TPUMESH_REPORT_REPORT_FILES_H_
