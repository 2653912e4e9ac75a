// tpumesh: a TPU-v5e-like mesh emulated on the CPU. See `tpumesh --help`.
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "CLI/CLI.hpp"
#include "base/printable.h"
#include "io/atomic_file.h"
#include "io/model_file.h"
#include "kernels/cpu_path.h"
#include "mesh/array.h"
#include "tools/commands.h"
#include "tools/ranks.h"

int main(int argc, char** argv) {
  tpumesh::mesh::BoundHostHeap();
  tpumesh::pipeline::DisableHdf5ExitHandler();
  tpumesh::InstallTempFileCleanup();
  tpumesh::tools::RememberCommandLine(argc, argv);
  // A file size limit (`ulimit -f`, `prlimit --fsize`) makes a write past it
  // fail with EFBIG, reported like a full disk, instead of killing the
  // process with SIGXFSZ and leaving its temporaries behind.
  signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "tpumesh: an emulated TPU mesh on the CPU.\n"
      "Runs JAX-style SPMD work on N virtual TPU devices and reports what it\n"
      "would cost on the real chip (modelled figures are labelled modelled)."};
  app.name("tpumesh");
  app.set_version_flag("--version", std::string("tpumesh ") + TPUMESH_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  tpumesh::tools::RunFn run;
  tpumesh::tools::RegisterGenerate(app, &run);
  tpumesh::tools::RegisterDevices(app, &run);
  tpumesh::tools::RegisterConvert(app, &run);
  tpumesh::tools::RegisterInit(app, &run);
  tpumesh::tools::RegisterEval(app, &run);
  tpumesh::tools::RegisterBench(app, &run);
  tpumesh::tools::RegisterSimulate(app, &run);
  tpumesh::tools::RegisterRun(app, &run);

  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known |= sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::cerr << "tpumesh: unknown command " << tpumesh::Quoted(argv[1]) << " (commands: " << names
                << "; see tpumesh --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tpumesh: " << tpumesh::OneLine(e.what()) << " (see tpumesh --help)\n";
    return 2;
  }
  if (!run) return 2;
  // A bad TPUMESH_SIMD would leave the kernels on the host's path unasked.
  if (tpumesh::Status simd = tpumesh::kernels::CpuPathStatus(); !simd.ok()) {
    std::cerr << "tpumesh: error: " << tpumesh::OneLine(simd.message()) << "\n";
    return 1;
  }
  // Every failure is a Status; an exception that still escapes (memory the
  // host cannot give, a thread that cannot start) is one line too, never an
  // abort.
  tpumesh::Status status;
  try {
    status = run();
  } catch (const std::bad_alloc&) {
    status = tpumesh::ResourceExhaustedError(
        "out of host memory: the run asked for more than this host can give (fewer or smaller images, fewer "
        "devices, or a bf16 model file)");
  } catch (const std::exception& e) {
    status = tpumesh::InternalError(std::string("unexpected failure: ") + e.what());
  }
  // One line of valid UTF-8 whatever a name in the message holds (a
  // newline, bytes that are not UTF-8): base/printable.h.
  if (!status.ok()) {
    // One of several ranks (mpirun, srun): every rank ends, the cause
    // printed once, by the rank where it arose (docs/cluster.md).
    if (tpumesh::mesh::Cluster* c = tpumesh::tools::JoinedCluster(); c != nullptr && c->size() > 1)
      c->Fail(tpumesh::Status(status.code(), tpumesh::OneLine(status.message())));
    std::cerr << "tpumesh: error: " << tpumesh::OneLine(status.message()) << "\n";
    return 1;
  }
  return 0;
}
