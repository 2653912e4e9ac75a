// The --report / --trace / --report-csv files of generate, eval and
// simulate, written the same way, with a line on stdout naming each; and the
// check every command that writes files runs on its paths before it starts.
#ifndef TPUMESH_TOOLS_REPORT_OUTPUT_H_
#define TPUMESH_TOOLS_REPORT_OUTPUT_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "pipeline/report.h"

namespace tpumesh::tools {

// Where the chip's view goes; empty: not written.
struct ReportPaths {
  std::string report;  // JSON (pipeline/report.h ReportJson)
  std::string trace;   // Chrome trace (Perfetto)
  std::string csv;     // per-layer CSV (pipeline/report.h LayersCsv)
  bool any() const { return !report.empty() || !trace.empty() || !csv.empty(); }
  // (flag, path) for CheckRunFiles.
  std::vector<std::pair<std::string, std::string>> flags() const {
    return {{"--report", report}, {"--trace", trace}, {"--report-csv", csv}};
  }
};

// Appends the report's files to a run's outputs (written together,
// io/atomic_file.h WriteFilesAtomic). Empty paths are skipped.
void AddReportFiles(const pipeline::RunReport& report, const ReportPaths& paths,
                    std::vector<std::pair<std::string, std::string>>* files);
// AddReportFiles and the write, for a command with no other output.
Status WriteReportFiles(const pipeline::RunReport& report, const ReportPaths& paths);
// The line on stdout for each report file written.
void PrintReportFiles(const ReportPaths& paths);

// Before a run: every output path is writable (io/atomic_file.h
// CheckWritable), and no two of the run's files are the same, so that no
// output overwrites an input or another output. `outputs` and `inputs` are
// (flag, path) pairs; empty paths are skipped. `image_dir`, when not empty,
// is where the images go: an input named image_*.png or grid.png there is
// refused too.
Status CheckRunFiles(const std::vector<std::pair<std::string, std::string>>& outputs,
                     const std::vector<std::pair<std::string, std::string>>& inputs,
                     const std::string& image_dir = "");

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_REPORT_OUTPUT_H_
