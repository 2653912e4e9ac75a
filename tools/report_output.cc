#include "tools/report_output.h"

#include <cstdio>
#include <filesystem>

#include "io/atomic_file.h"

namespace tpumesh::tools {

void PrintReportFiles(const ReportPaths& p) {
  if (!p.report.empty()) std::printf("report: %s\n", p.report.c_str());
  if (!p.trace.empty()) std::printf("trace: %s (open in https://ui.perfetto.dev)\n", p.trace.c_str());
  if (!p.csv.empty()) std::printf("per-layer CSV: %s\n", p.csv.c_str());
}

void AddReportFiles(const pipeline::RunReport& report, const ReportPaths& p,
                    std::vector<std::pair<std::string, std::string>>* files) {
  if (!p.report.empty()) files->emplace_back(p.report, pipeline::ReportJson(report));
  if (!p.trace.empty()) files->emplace_back(p.trace, pipeline::TraceJson(report));
  if (!p.csv.empty()) files->emplace_back(p.csv, pipeline::LayersCsv(report));
}

Status WriteReportFiles(const pipeline::RunReport& report, const ReportPaths& p) {
  std::vector<std::pair<std::string, std::string>> files;
  AddReportFiles(report, p, &files);
  TPUMESH_RETURN_IF_ERROR(WriteFilesAtomic(files));
  PrintReportFiles(p);
  return OkStatus();
}

namespace {

std::filesystem::path Canonical(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  return ec ? std::filesystem::absolute(path, ec).lexically_normal() : p;
}

}  // namespace

Status CheckRunFiles(const std::vector<std::pair<std::string, std::string>>& outputs,
                     const std::vector<std::pair<std::string, std::string>>& inputs, const std::string& image_dir) {
  struct Seen {
    std::string flag;
    std::filesystem::path path;
    bool input;
  };
  std::vector<Seen> seen;
  auto add = [&](const std::string& flag, const std::string& path, bool input) -> Status {
    const std::filesystem::path c = Canonical(path);
    for (const Seen& other : seen)
      if (!input && other.path == c)
        return InvalidArgumentError(flag + " " + path + ": the same file as " + other.flag +
                                    (other.input ? " (an input is never overwritten)"
                                                 : " (two outputs cannot share a file)"));
    seen.push_back({flag, c, input});
    return OkStatus();
  };
  for (const auto& [flag, path] : inputs)
    if (!path.empty()) TPUMESH_RETURN_IF_ERROR(add(flag, path, true));
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    TPUMESH_RETURN_IF_ERROR(add(flag, path, false));
    TPUMESH_RETURN_IF_ERROR(CheckWritable(path, flag));
  }
  if (!image_dir.empty()) {
    const std::filesystem::path dir = Canonical(image_dir);
    for (const auto& [flag, path] : inputs) {
      if (path.empty()) continue;
      const std::filesystem::path c = Canonical(path);
      const std::string name = c.filename().string();
      if (c.parent_path() == dir && (name == "grid.png" || name.rfind("image_", 0) == 0))
        return InvalidArgumentError(flag + " " + path + ": in the image folder, where generate writes " + name +
                                    " (an input is never overwritten)");
    }
  }
  return OkStatus();
}

}  // namespace tpumesh::tools
