#include "tools/report_output.h"

#include <cstdio>
#include <filesystem>

#include "io/atomic_file.h"

namespace tpumesh::tools {

void PrintReportFiles(const std::string& report_path, const std::string& trace_path) {
  if (!report_path.empty()) std::printf("report: %s\n", report_path.c_str());
  if (!trace_path.empty()) std::printf("trace: %s (open in https://ui.perfetto.dev)\n", trace_path.c_str());
}

void AddReportFiles(const pipeline::RunReport& report, const std::string& report_path,
                    const std::string& trace_path, std::vector<std::pair<std::string, std::string>>* files) {
  if (!report_path.empty()) files->emplace_back(report_path, pipeline::ReportJson(report));
  if (!trace_path.empty()) files->emplace_back(trace_path, pipeline::TraceJson(report));
}

Status WriteReportFiles(const pipeline::RunReport& report, const std::string& report_path,
                        const std::string& trace_path) {
  std::vector<std::pair<std::string, std::string>> files;
  AddReportFiles(report, report_path, trace_path, &files);
  TPUMESH_RETURN_IF_ERROR(WriteFilesAtomic(files));
  PrintReportFiles(report_path, trace_path);
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
