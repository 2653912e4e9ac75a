// The output guard every run that writes files passes before any work (the
// CLI's commands and the Python module's writers alike): each output is
// writable where it is, and no output overwrites an input, another output,
// a file inside an input folder, or one of the images generate writes.
#ifndef TPUMESH_IO_RUN_FILES_H_
#define TPUMESH_IO_RUN_FILES_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tpumesh {

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

// The guard, run before any work: each output is writable where it is
// (io/atomic_file.h CheckWritable: not a directory, FIFO, device or socket;
// its folder exists and takes a file), and no output
// is an input, another output, a file inside an input folder, or one of the
// images generate writes; an entry of the image folder named like an image
// must be a regular file (or absent), and no input may be one of them.
Status CheckRunFiles(const RunFiles& files);

// The file name of generate's image i of a set of `count`: image_NN.png,
// with as many digits as the last index needs (two at least).
std::string ImageFileName(int i, int count);

// The image folder holds one set: refuses an image_NN.png in `dir` that a
// set of `count` images does not replace (left from a larger set: it would
// stay beside the new one as if it belonged to it). Run once the count is
// known (after the request is validated), before any work.
Status CheckImageSet(const std::string& dir, int count);

// {"--chip", path} when the chip flag names an existing file (a chip file,
// not a preset), else an empty path: the chip file is an input like any
// other.
std::pair<std::string, std::string> ChipInput(const std::string& chip);

}  // namespace tpumesh

#endif  // TPUMESH_IO_RUN_FILES_H_
