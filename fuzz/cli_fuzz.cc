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
  CLI::App app{"tpumesh"};
  app.require_subcommand(1);
  tpumesh::tools::RunFn run;
  tpumesh::tools::RegisterGenerate(app, &run);
  tpumesh::tools::RegisterDevices(app, &run);
  tpumesh::tools::RegisterConvert(app, &run);
  tpumesh::tools::RegisterInit(app, &run);
  tpumesh::tools::RegisterEval(app, &run);
  tpumesh::tools::RegisterBench(app, &run);
  tpumesh::tools::RegisterSimulate(app, &run);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  }
  return 0;
}
