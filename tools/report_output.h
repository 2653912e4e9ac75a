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

// The files a command reads and writes, as (flag, path) pairs; empty paths
// are skipped.
struct RunFiles {
  std::vector<std::pair<std::string, std::string>> outputs;
  std::vector<std::pair<std::string, std::string>> inputs;
  // Folders read whole (convert's diffusers folder, init's --tokenizer): no
  // output may be inside one.
  std::vector<std::pair<std::string, std::string>> input_dirs;
  // generate's image folder: its image_NN.png and grid.png are outputs too,
  // and preview.png when `preview` (--preview-every).
  std::string image_dir;
  bool preview = false;
};

// The one guard every command that writes runs before any work: each output
// is writable where it is (io/atomic_file.h CheckWritable: not a directory,
// FIFO, device or socket; its folder exists and takes a file), and no output
// is an input, another output, a file inside an input folder, or one of the
// images generate writes; an entry of the image folder named like an image
// must be a regular file (or absent), and no input may be one of them.
Status CheckRunFiles(const RunFiles& files);

// The image folder holds one set: refuses an image_NN.png in `dir` that a
// set of `count` images does not replace (left from a larger set: it would
// stay beside the new one as if it belonged to it). Run once the count is
// known (after the request is validated), before any work.
Status CheckImageSet(const std::string& dir, int count);

// {"--chip", path} when the chip flag names an existing file (a chip file,
// not a preset), else an empty path: the chip file is an input like any
// other.
std::pair<std::string, std::string> ChipInput(const std::string& chip);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_REPORT_OUTPUT_H_
