// The plugin's profiler (docs/pjrt.md, "Profiling"): the PJRT profiler
// extension (pjrt/profiler_c_api.h) through which jax.profiler.trace
// collects, for every execution while a session runs, one plane per
// emulated device with each op's modelled start and duration and the
// host's wall time of the execution (pjrt/xspace.h).
//
// Contract: sessions may overlap (each collects what ran while it was
// started); PJRT_LoadedExecutable_Execute asks ProfilingActive() before
// pricing an execution for a trace and hands it to RecordExecution(). No
// profiler function throws or aborts: failures are PLUGIN_Profiler_Errors.
#ifndef TPUMESH_PJRT_PROFILER_H_
#define TPUMESH_PJRT_PROFILER_H_

#include "pjrt/pjrt_c_api.h"
#include "pjrt/xspace.h"

namespace tpumesh::pjrt {

// The extension, for PJRT_Api's extension chain.
PJRT_Extension_Base* ProfilerExtension();
// Whether a session is started (cheap: an atomic load).
bool ProfilingActive();
// Gives `execution` to every started session.
void RecordExecution(const ProfiledExecution& execution);
// The realtime clock in ns since the epoch (the profiler's time base).
int64_t WallNanos();

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_PROFILER_H_
