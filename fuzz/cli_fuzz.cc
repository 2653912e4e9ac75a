// The command line: argv from the input split at NUL bytes, parsed by the
// same CLI11 app as tpumesh's (no command is run).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tools/commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"tpumesh"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  // One app for every input (building it is most of the cost), cleared
  // between parses as CLI11 allows.
  static CLI::App& app = *[] {
    auto* a = new CLI::App{"tpumesh"};
    a->require_subcommand(1);
    static tpumesh::tools::RunFn run;
    tpumesh::tools::RegisterGenerate(*a, &run);
    tpumesh::tools::RegisterDevices(*a, &run);
    tpumesh::tools::RegisterConvert(*a, &run);
    tpumesh::tools::RegisterInit(*a, &run);
    tpumesh::tools::RegisterEval(*a, &run);
    tpumesh::tools::RegisterBench(*a, &run);
    tpumesh::tools::RegisterSimulate(*a, &run);
    return a;
  }();
  app.clear();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  }
  return 0;
}
