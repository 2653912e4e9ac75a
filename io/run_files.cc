#include "io/run_files.h"

#include <algorithm>
#include <filesystem>

#include "io/atomic_file.h"

namespace tpumesh {
namespace {

std::filesystem::path Canonical(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(path, ec);
  return ec ? std::filesystem::absolute(path, ec).lexically_normal() : p;
}

// generate's image names: image_NN.png (two digits or more) and grid.png.
bool IsImageName(const std::string& name, bool preview) {
  if (name == "grid.png" || (preview && name == "preview.png")) return true;
  if (name.size() < 12 || name.rfind("image_", 0) != 0 || name.compare(name.size() - 4, 4, ".png") != 0) return false;
  return name.find_first_not_of("0123456789", 6) == name.size() - 4;
}

// Whether `path` is somewhere under the folder `dir` (or under one of its
// subfolders where a symlink leads: a diffusers folder's unet/ may live
// elsewhere), by the path as given (dir/unet/m.h5) or as resolved (a symlink
// elsewhere into dir): some folder on either way up is one of those.
bool IsInside(const std::string& path, const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> roots = {dir};
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) roots.push_back(it->path());
  const std::filesystem::path lexical = std::filesystem::absolute(path, ec).lexically_normal();
  for (const std::filesystem::path& p : {lexical, Canonical(path)})
    for (std::filesystem::path a = p.parent_path(); !a.empty(); a = a.parent_path()) {
      for (const auto& root : roots)
        if (std::filesystem::equivalent(a, root, ec)) return true;
      if (a == a.root_path()) break;
    }
  return false;
}

}  // namespace

std::string ImageFileName(int i, int count) {
  const int digits = std::max(2, static_cast<int>(std::to_string(std::max(count - 1, 0)).size()));
  const std::string n = std::to_string(i);
  return "image_" + std::string(std::max(0, digits - static_cast<int>(n.size())), '0') + n + ".png";
}

Status CheckImageSet(const std::string& dir, int count) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsImageName(name, false) || name == "grid.png") continue;
    const std::string index = name.substr(6, name.size() - 10);  // image_<index>.png
    if (index.size() <= 9 && std::stoi(index) < count && ImageFileName(std::stoi(index), count) == name)
      continue;
    return InvalidArgumentError(it->path().string() + ": an image this run does not replace (it writes " +
                                ImageFileName(0, count) +
                                (count > 1 ? " to " + ImageFileName(count - 1, count) : std::string()) +
                                " and grid.png; a folder holds one set): move it away or choose another -o");
  }
  return OkStatus();
}

std::pair<std::string, std::string> ChipInput(const std::string& chip) {
  std::error_code ec;
  return {"--chip", std::filesystem::exists(chip, ec) ? chip : std::string()};
}

Status CheckRunFiles(const RunFiles& files) {
  struct Seen {
    std::string flag;
    std::filesystem::path path;
    bool input;
  };
  std::vector<Seen> seen;
  for (const auto& [flag, path] : files.inputs)
    if (!path.empty()) seen.push_back({flag, Canonical(path), true});
  const std::filesystem::path image_dir = files.image_dir.empty() ? std::filesystem::path() : Canonical(files.image_dir);
  for (const auto& [flag, path] : files.outputs) {
    if (path.empty()) continue;
    const std::filesystem::path c = Canonical(path);
    const std::string what = flag + " " + path;
    for (const Seen& other : seen)
      if (other.path == c)
        return InvalidArgumentError(what + ": the same file as " + other.flag +
                                    (other.input ? " (an input is never overwritten)"
                                                 : " (two outputs cannot share a file)"));
    for (const auto& [dir_flag, dir] : files.input_dirs)
      if (!dir.empty() && IsInside(path, dir))
        return InvalidArgumentError(what + ": inside " + dir + ", the folder " + dir_flag +
                                    " reads (an input is never overwritten)");
    if (!image_dir.empty() && c.parent_path() == image_dir && IsImageName(c.filename().string(), files.preview))
      return InvalidArgumentError(what + ": in the image folder, where generate writes " + c.filename().string() +
                                  " (two outputs cannot share a file)");
    seen.push_back({flag, c, false});
    TPUMESH_RETURN_IF_ERROR(CheckWritable(path, flag));
    // (checked after CheckWritable: an existing folder "is a directory")
    if (!image_dir.empty() && std::mismatch(c.begin(), c.end(), image_dir.begin(), image_dir.end()).first == c.end())
      return InvalidArgumentError(what + ": " + (c == image_dir ? "the image folder" : "a folder above the image folder") +
                                  " -o " + files.image_dir + " (an output file cannot be a folder of images)");
  }
  if (!image_dir.empty()) {
    for (const auto& [flag, path] : files.inputs) {
      if (path.empty()) continue;
      const std::filesystem::path c = Canonical(path);
      if (c.parent_path() == image_dir && IsImageName(c.filename().string(), files.preview))
        return InvalidArgumentError(flag + " " + path + ": in the image folder, where generate writes " +
                                    c.filename().string() + " (an input is never overwritten)");
    }
    // An entry named like an image must be a file generate can replace.
    std::error_code ec;
    for (std::filesystem::directory_iterator it(files.image_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!IsImageName(name, files.preview)) continue;
      const auto status = std::filesystem::symlink_status(it->path(), ec);
      if (std::filesystem::is_regular_file(status) || std::filesystem::is_symlink(status)) continue;
      return InvalidArgumentError(it->path().string() + ": " +
                                  (std::filesystem::is_directory(status) ? "a directory" : "not a regular file") +
                                  " where generate writes an image (move it away or choose another -o)");
    }
  }
  return OkStatus();
}

}  // namespace tpumesh
