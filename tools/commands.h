// The tpumesh subcommands. Each Register* adds its subcommand to the CLI11
// app and sets `run` to the function that executes it once parsing succeeded;
// that function returns a Status, which main turns into one line and a
// non-zero exit.
#ifndef TPUMESH_TOOLS_COMMANDS_H_
#define TPUMESH_TOOLS_COMMANDS_H_

#include <functional>

#include "CLI/CLI.hpp"
#include "base/status.h"

namespace tpumesh::tools {

using RunFn = std::function<Status()>;

void RegisterDevices(CLI::App& app, RunFn* run);
void RegisterConvert(CLI::App& app, RunFn* run);
void RegisterInit(CLI::App& app, RunFn* run);
void RegisterEval(CLI::App& app, RunFn* run);
void RegisterGenerate(CLI::App& app, RunFn* run);
void RegisterBench(CLI::App& app, RunFn* run);
void RegisterSimulate(CLI::App& app, RunFn* run);
void RegisterRun(CLI::App& app, RunFn* run);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_COMMANDS_H_
